// How fast attempts are finishing, for sizing the worker's claimed-ahead backlog (worker.ts `ahead`) and
// how many of its node's own deliveries it takes (worker.ts `takeCap`).

export class FinishRate {
  private rate = 0
  private finished = 0
  private windowStart: number
  /** The fastest full window within the last `peakMs`, and when it closed. */
  private peakRate = 0
  private peakAt = Number.NEGATIVE_INFINITY

  /** Measured over windows of at least `windowMs`; `now` is injectable for tests. */
  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = () => performance.now(),
    private readonly peakMs = 30_000,
  ) {
    this.windowStart = now()
  }

  /** One attempt finished. */
  count(): void {
    this.finished++
    const now = this.now()
    if (now - this.windowStart < this.windowMs) return
    this.rate = (this.finished * 1000) / (now - this.windowStart)
    this.finished = 0
    this.windowStart = now
    if (this.rate >= this.peakRate || now - this.peakAt > this.peakMs) {
      this.peakRate = this.rate
      this.peakAt = now
    }
  }

  /**
   * The fastest rate of a full window closed within the last `peakMs` (0 if none): what an idle worker
   * can expect of its next burst, where `perSecond` has fallen to nothing.
   */
  recentPeak(): number {
    return this.now() - this.peakAt > this.peakMs ? 0 : this.peakRate
  }

  /**
   * Attempts per second: the last full window's rate, or less if the open window is already long and
   * slower (every slot stuck on a receiver that turned slow finishes nothing, and the backlog must shrink).
   */
  perSecond(): number {
    const open = this.now() - this.windowStart
    return open < this.windowMs ? this.rate : Math.min(this.rate, (this.finished * 1000) / open)
  }
}
