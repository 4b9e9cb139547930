// Growing a typed array: JavaScript's have a fixed length, so a column that grows is copied into a
// longer one (the packed hot state's columns, key-table.ts and key-devices.ts, and its device arena).

/** A copy of `a` with room for `length` elements (the rest zero). */
export function resized<T extends Uint8Array | Int32Array | Uint32Array | Float64Array>(a: T, length: number): T {
  const b = new (a.constructor as new (n: number) => T)(length)
  b.set(a.subarray(0, Math.min(a.length, length)))
  return b
}
