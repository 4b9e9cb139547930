// How deeply JSON from outside may nest, and the one-pass check of a text against it: every body on
// every route (http/kernel.ts), an import's lines and cells, a license's JSON read before its
// signature is checked (docs/decisions.md, "Requests").

/**
 * How deeply any JSON body may nest objects and arrays (the body itself is level 1), on every route
 * and door: deeper is 400 before JSON.parse and before any schema runs (docs/decisions.md, "Requests").
 * Elysia's validation error pretty-prints the rejected value, whose indentation grows with depth:
 * that made a 60 KB body nested 10,000 deep cost 10 s of event loop. No body in the contract comes
 * near 32 levels.
 */
export const MAX_JSON_DEPTH = 32

/**
 * Whether a JSON text nests objects and arrays more than `max` levels deep: one pass that counts the
 * brackets outside strings, linear in the text and allocation-free. Meant to run before JSON.parse;
 * on text that is not JSON its answer does not matter (the parse refuses it).
 */
export function nestsDeeperThan(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // a string: skip to its closing quote (a backslash escapes the next character)
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i)
        if (d === 0x5c) i++
        else if (d === 0x22) break
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return false
}
