// Shared by the benchmark programs: every figure they print is a median over repeated, interleaved runs.

/** The median (the mean of the two middle values for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y)
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}
