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

/** The index after the JSON string that opens at `i` (a quote; a backslash escapes the next character), or -1 if it never closes. */
export function stringEnd(text: string, i: number): number {
  for (i++; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x5c) i++
    else if (c === 0x22) return i + 1
  }
  return -1
}

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
      // a string: skip to its closing quote (an unclosed one ends the text)
      i = stringEnd(text, i) - 1
      if (i < 0) return false
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return false
}

/** How many values one import row's JSON may hold: a key with 10,000 activations has about 40,000. */
export const MAX_ROW_VALUES = 65_536
/** How many members one object in an import row may have (the widest a row needs is its 64 entitlements). */
export const MAX_OBJECT_MEMBERS = 1_000

/**
 * Why a JSON text (one import row) would cost too much to parse, or null: more than `maxValues`
 * values in all, or an object of more than `maxMembers` members. JSON.parse's cost follows the number
 * of values, and is worst for wide objects (150,000 keys in 1.6 MB: ≈100 ms of one event loop turn),
 * not the bytes: a row of 10,000 activations parses in ≈5 ms. One pass like nestsDeeperThan, run after
 * it (the depth is bounded, so the stack is too).
 */
export function tooWide(text: string, maxValues = MAX_ROW_VALUES, maxMembers = MAX_OBJECT_MEMBERS): string | null {
  const isObject = new Uint8Array(MAX_JSON_DEPTH + 2)
  const members = new Uint32Array(MAX_JSON_DEPTH + 2)
  let depth = 0
  let values = 1
  const n = text.length
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      i = stringEnd(text, i) - 1
      if (i < 0) return null
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_JSON_DEPTH + 1) return null // nestsDeeperThan's to refuse
      isObject[depth] = c === 0x7b ? 1 : 0
      members[depth] = 1
    } else if (c === 0x7d || c === 0x5d) depth--
    else if (c === 0x2c) {
      if (++values > maxValues) return `must hold at most ${maxValues} JSON values`
      if (depth > 0 && isObject[depth] === 1 && ++members[depth]! > maxMembers) return `must not hold an object of more than ${maxMembers} fields`
    }
  }
  return null
}
