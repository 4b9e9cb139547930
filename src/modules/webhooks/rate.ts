// How fast attempts are finishing, for sizing the worker's claimed-ahead backlog (worker.ts `ahead`).

export class FinishRate {
  private rate = 0
  private finished = 0
  private windowStart: number

  /** Measured over windows of at least `windowMs`; `now` is injectable for tests. */
  constructor(
    private readonly windowMs: number,
    private readonly now: () => number = () => performance.now(),
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
