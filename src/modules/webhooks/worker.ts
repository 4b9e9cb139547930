// The delivery worker, one per node. It takes the deliveries its own node's transactions write, at their
// commit, without a claim (outbox.ts emitMany); the rest it claims from Postgres (queue.ts), woken by
// NOTIFY at the commit of an event that has deliveries (every node listens), by its own retry timers,
// and by a slow poll as the fallback. It sends them concurrently and logs every attempt.
import type { Deps } from '../../deps'
import { webhookDeliveries, webhookHandedBack, webhookOwnDeliveries } from '../../infra/metrics'
import { offerOwnDeliveries, WEBHOOK_WAKE_CHANNEL, type DeliveryTaker, type OwnDelivery } from '../events/outbox'
import type { Sql } from '../../infra/db'
import { claimDue, logAttempts, messageOf, ownJobs, recordAttempt, releaseClaims, type AttemptRecord, type Job, type Verdict } from './queue'
import { FinishRate } from './rate'
import { send, type AttemptOutcome } from './sender'

export interface WorkerOptions {
  /** Attempts in flight at once on this node. */
  concurrency?: number
  /** Fallback poll for due work (retries scheduled by other nodes, missed notifications). */
  pollMs?: number
  /**
   * How long a claimed job may wait for a slot before it is handed back unsent. At most (and by
   * default) what its claim leaves once the attempt's timeout and 10 s are set aside: 20 s.
   */
  startByMs?: number
}

const DEFAULT_CONCURRENCY = 64
const DEFAULT_POLL_MS = 1_000
/** Claimed-ahead backlog: this long of work at the current rate (see `ahead`), at most MAX_AHEAD jobs. */
const AHEAD_MS = 50
const MAX_AHEAD = 1_000
const RATE_WINDOW_MS = 100
/** Rows per claim statement, and claim statements in flight, at most. */
const MAX_CLAIM = 500
const MAX_CLAIMS = 2
/** Local retry timers only for short delays; longer ones are found by the poll. */
const MAX_TIMER_MS = 60_000
/**
 * The node's own deliveries taken at their commit (see `takeCap`): about this long of work at the rate
 * attempts finish, at most MAX_TAKEN jobs (≈ 10 MB), at most MAX_CLAIM from one statement.
 */
const TAKE_MS = 2_000
const MAX_TAKEN = 50_000

/** What follows an attempt: attempt n failing is retried after delays[n-1] (±10% jitter), then failed. */
export function decide(attempt: number, outcome: AttemptOutcome, delaysMs: readonly number[], random = Math.random): Verdict {
  if (outcome.success) return { kind: 'succeeded' }
  if (outcome.statusCode === 410) return { kind: 'gone' }
  if (attempt > delaysMs.length) return { kind: 'failed' }
  return { kind: 'retry', delayMs: Math.round(delaysMs[attempt - 1] * (0.9 + 0.2 * random())) }
}

const METRIC_OUTCOME = { succeeded: 'success', retry: 'retry', failed: 'failed', gone: 'disabled' } as const

/**
 * Writes attempt logs in batches: one statement for whatever finished while the previous one was being
 * written. No waiting when idle (a lone attempt is written at once), far fewer round trips under load.
 */
class AttemptRecorder {
  private waiting: { rec: AttemptRecord; done: (recorded: boolean) => void; fail: (err: unknown) => void }[] = []
  private writing = false

  constructor(private readonly sql: Sql) {}

  record(rec: AttemptRecord): Promise<boolean> {
    if (rec.verdict.kind === 'gone') return recordAttempt(this.sql, rec) // rare; disables the webhook too
    return new Promise((done, fail) => {
      this.waiting.push({ rec, done, fail })
      this.write()
    })
  }

  private write(): void {
    if (this.writing || this.waiting.length === 0) return
    this.writing = true
    const batch = this.waiting.splice(0, 500)
    const recs = batch.map((b) => b.rec)
    logAttempts(this.sql, recs)
      .catch(() => this.oneByOne(recs)) // one bad row must not sink the others
      .then(
        (recorded) => batch.forEach((b) => b.done(recorded.has(b.rec.job.deliveryId))),
        (err) => batch.forEach((b) => b.fail(err)),
      )
      .finally(() => {
        this.writing = false
        this.write()
      })
  }

  private async oneByOne(recs: AttemptRecord[]): Promise<Set<string>> {
    const recorded = new Set<string>()
    for (const rec of recs) {
      const done = await logAttempts(this.sql, [rec]).catch(() => new Set<string>())
      if (done.size) recorded.add(rec.job.deliveryId)
    }
    return recorded
  }
}

/** A claimed job and when its claim was sent (its claim runs from a moment after that). */
interface Claimed {
  job: Job
  claimedAt: number
}

export class DeliveryWorker implements DeliveryTaker {
  private readonly concurrency: number
  private readonly pollMs: number
  readonly claimMs: number
  /** A claimed job starts within this long of its claim, or not at all: its claim must outlast the attempt (up to the timeout) with 10 s to spare. */
  private readonly startBy: number
  /** Claimed jobs waiting for a slot (see `ahead`). */
  private ready: Claimed[] = []
  /** Deliveries being sent (the concurrency slots). */
  private inFlight = new Set<string>()
  /** Every job until its attempt is logged (what shutdown waits for). */
  private tasks = new Set<Promise<void>>()
  /** Claim statements in flight, and the rows they asked for (room they take until they are back). */
  private claims = new Set<Promise<void>>()
  private asked = 0
  /** Room held for the node's own deliveries by transactions not yet ended (reserve/settle). */
  private incoming = 0
  private unoffer: (() => void) | null = null
  /** Set when there may be due work not yet claimed: a wake-up. */
  private dirty = false
  /** Set while claims come back full: more is due than was claimed. */
  private backlog = false
  private stopped = false
  private readonly abort = new AbortController()
  private timers = new Set<Timer>()
  private poller: Timer | null = null
  private unlisten: (() => Promise<void>) | null = null
  private readonly recorder: AttemptRecorder
  private readonly finishRate = new FinishRate(RATE_WINDOW_MS)

  constructor(
    private readonly deps: Deps,
    options: WorkerOptions = {},
  ) {
    this.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY
    this.pollMs = options.pollMs ?? DEFAULT_POLL_MS
    // Longer than any attempt can take, so a live node never loses a claim it is still working on.
    this.claimMs = deps.config.webhookTimeoutMs + 30_000
    this.startBy = Math.min(options.startByMs ?? Infinity, this.claimMs - deps.config.webhookTimeoutMs - 10_000)
    this.recorder = new AttemptRecorder(deps.sql)
  }

  async start(): Promise<this> {
    try {
      this.unlisten = await this.deps.db.listen(WEBHOOK_WAKE_CHANNEL, () => this.wake())
    } catch (err) {
      this.deps.log.warn({ err: String(err) }, 'webhook worker: LISTEN failed; relying on polling')
    }
    this.poller = setInterval(() => this.wake(), this.pollMs)
    this.unoffer = offerOwnDeliveries(this.deps.sql, this)
    this.wake() // pending work from before a restart
    return this
  }

  /**
   * How many of its node's own deliveries the worker holds at most (claimed, waiting or in flight): what
   * it can start well within `startBy` at the rate it delivers, TAKE_MS of it (10× short of `startBy`),
   * measured now while it is busy and as the last 30 s's peak while it idles, and never less than what it
   * would claim. A receiver that turned slow meanwhile: the jobs that cannot start in time are handed back
   * like claimed ones (startReady).
   */
  private takeCap(): number {
    const rate = this.inFlight.size === 0 ? this.finishRate.recentPeak() : this.finishRate.perSecond()
    return Math.max(this.concurrency + this.ahead(), Math.min(MAX_TAKEN, Math.round((rate * TAKE_MS) / 1000)))
  }

  /** DeliveryTaker: room for the deliveries of a statement about to be written, held until it is settled. */
  reserve(): number {
    if (this.stopped) return 0
    const free = this.takeCap() - this.inFlight.size - this.ready.length - this.asked - this.incoming
    const n = Math.max(0, Math.min(MAX_CLAIM, free))
    this.incoming += n
    return n
  }

  release(n: number): void {
    this.incoming -= n
  }

  /** The deliveries a committed transaction took: sent as if claimed when the statement was (`at`). */
  settle(held: number, own: OwnDelivery[], committed: boolean, at: number): void {
    this.incoming -= held
    if (!committed || own.length === 0) return
    const { jobs, unsignable } = ownJobs(this.deps.secretKey, own)
    // A stopped worker starts nothing: due again at once, for any node. So is a delivery whose secret
    // cannot be opened, for the claim that fails it (logged).
    const back = this.stopped ? [...jobs, ...unsignable] : unsignable
    if (back.length > 0) {
      releaseClaims(this.deps.sql, back).catch((err) => this.deps.log.warn({ err: String(err) }, 'webhook worker: release of own deliveries failed'))
    }
    if (this.stopped) return
    webhookOwnDeliveries.inc(jobs.length)
    for (const job of jobs) this.ready.push({ job, claimedAt: at })
    this.kick()
  }

  /** There may be due work: claim it (now, or when the local backlog runs low). */
  wake(): void {
    this.dirty = true
    this.kick()
  }

  /**
   * How many jobs to keep claimed beyond the slots: the next batch is claimed while the current one is
   * being sent, so the slots never wait for a claim's round trip under load. About AHEAD_MS of work at
   * the rate attempts are finishing (a claim under load takes 5-30 ms, a fast receiver turns the slots
   * over in a few), at least one round of the slots (a slow receiver: claimed jobs then start within
   * seconds, well inside `startBy`), at most MAX_AHEAD. A receiver that turns slow with a backlog claimed
   * for a fast one: jobs not started within `startBy` are handed back (startReady).
   */
  private ahead = () => Math.min(MAX_AHEAD, Math.max(this.concurrency, Math.round((this.finishRate.perSecond() * AHEAD_MS) / 1000)))
  // (Room held for transactions still open is not counted: a long one must not stop the claims meanwhile.)
  private room = () => this.concurrency + this.ahead() - this.inFlight.size - this.ready.length - this.asked
  /**
   * Claim when idle, or once there is room for a batch worth a statement: a quarter of the slots or of
   * the claimed-ahead backlog, whichever is larger.
   */
  private canClaim = () =>
    this.room() >= (this.inFlight.size === 0 && this.ready.length === 0 ? 1 : Math.max(1, this.concurrency >> 2, this.ahead() >> 2))

  private kick(): void {
    this.startReady()
    while (!this.stopped && (this.dirty || this.backlog) && this.claims.size < MAX_CLAIMS && this.canClaim()) this.claim()
  }

  /**
   * One claim statement for as many jobs as there is room for. Up to MAX_CLAIMS run at once: under load
   * a claim's round trip is mostly waiting (for a CPU, for Postgres), and the slots free up meanwhile.
   */
  private claim(): void {
    this.dirty = false
    const limit = Math.min(MAX_CLAIM, this.room())
    this.asked += limit
    const claimedAt = performance.now()
    const done: Promise<void> = claimDue(this.deps.sql, this.deps.secretKey, limit, this.claimMs)
      .then(async (jobs) => {
        if (this.stopped) return releaseClaims(this.deps.sql, jobs)
        this.backlog = jobs.length === limit // a full batch: there may be more
        for (const job of jobs) this.ready.push({ job, claimedAt })
      })
      .catch((err) => {
        this.backlog = false // the poll tries again, not a tight loop against a failing database
        this.deps.log.warn({ err: String(err) }, 'webhook worker: claim failed')
      })
      .finally(() => {
        this.asked -= limit
        this.claims.delete(done)
        this.kick()
      })
    this.claims.add(done)
  }

  /** Fills free slots from the claimed backlog, oldest claim first. */
  private startReady(): void {
    const late: Job[] = []
    while (!this.stopped && this.ready.length > 0 && this.inFlight.size < this.concurrency) {
      const { job, claimedAt } = this.ready.shift()!
      // Its claim could run out while it is being sent: hand it back (due again at once, for any node)
      // rather than send it late; should that fail, it is due when its claim ends.
      if (performance.now() - claimedAt > this.startBy) late.push(job)
      else this.run(job)
    }
    if (late.length > 0) {
      webhookHandedBack.inc(late.length)
      releaseClaims(this.deps.sql, late).then(
        () => this.wake(),
        (err) => this.deps.log.warn({ err: String(err) }, 'webhook worker: release of late claims failed'),
      )
    }
  }

  private run(job: Job): void {
    // The slot frees as soon as the request is done; logging it is batched (the row's claim keeps other
    // claims off it meanwhile).
    const freeSlot = () => {
      if (!this.inFlight.delete(job.deliveryId)) return
      this.finishRate.count()
      this.kick()
    }
    this.inFlight.add(job.deliveryId)
    const task: Promise<void> = this.attempt(job, freeSlot)
      .catch((err) => this.deps.log.warn({ err: String(err), delivery: job.deliveryId }, 'webhook worker: attempt not logged'))
      .finally(() => {
        freeSlot()
        this.tasks.delete(task)
      })
    this.tasks.add(task)
  }

  private async attempt(job: Job, sent: () => void): Promise<void> {
    const { config, sql, log } = this.deps
    const outcome = await send(job.url, messageOf(job), {
      allowPrivate: config.webhookAllowPrivateUrls,
      timeoutMs: config.webhookTimeoutMs,
      signal: this.abort.signal,
    })
    sent()
    if (this.abort.signal.aborted && !outcome.success) {
      // Cut short by shutdown: not the receiver's fault, so not an attempt. Due again at once.
      await releaseClaims(sql, [job])
      return
    }
    const verdict = decide(job.attempts + 1, outcome, config.webhookRetryDelaysMs)
    if (!(await this.recorder.record({ job, outcome, verdict }))) return
    webhookDeliveries.inc({ outcome: METRIC_OUTCOME[verdict.kind] })
    if (log.isLevelEnabled('debug')) {
      log.debug(
        { webhook: job.webhookId, delivery: job.deliveryId, event: job.event.id, attempt: job.attempts + 1,
          status: outcome.statusCode, ms: outcome.durationMs, verdict: verdict.kind },
        'webhook attempt',
      )
    }
    if (verdict.kind === 'retry' && verdict.delayMs <= MAX_TIMER_MS) this.after(verdict.delayMs, () => this.wake())
  }

  private after(ms: number, fn: () => void) {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      fn()
    }, ms + 5)
    this.timers.add(timer)
  }

  /** Stops claiming, lets attempts in flight finish for up to `graceMs`, then cuts them short. */
  async stop(graceMs: number): Promise<void> {
    if (this.stopped) return
    this.stopped = true
    this.unoffer?.()
    if (this.poller) clearInterval(this.poller)
    for (const t of this.timers) clearTimeout(t)
    this.timers.clear()
    await this.unlisten?.().catch(() => {})
    await Promise.allSettled([...this.claims])
    // Claimed but never started: due again at once, for this node after a restart or any other.
    await releaseClaims(this.deps.sql, this.ready.splice(0).map((c) => c.job)).catch(() => {})
    const all = () => Promise.allSettled([...this.tasks])
    let timer: Timer | undefined
    const graceOver = new Promise<'late'>((r) => (timer = setTimeout(() => r('late'), graceMs)))
    if ((await Promise.race([all(), graceOver])) === 'late') this.abort.abort()
    clearTimeout(timer)
    await all()
  }
}

export const startDeliveryWorker = (deps: Deps, options?: WorkerOptions) => new DeliveryWorker(deps, options).start()
