// One clock tolerance for everything the client compares with the local clock: a signed answer's `t`
// (either way), an offline license's `issued_at` in the future, and a clock that stepped back since the
// latest time seen (NTP corrections, a laptop waking up). Beyond it the clock is wrong, not the answer.
export const CLOCK_SKEW_MS = 5 * 60_000
