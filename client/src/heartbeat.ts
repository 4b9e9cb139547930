// The heartbeat: validates every interval (a floating seat is held while beats arrive), one beat at a
// time: the next is scheduled only after the previous finished, so slow answers never overlap.
import { KeywardError } from './errors.js'
import type { Refusal, ValidateResult } from './answers.js'

export interface Heartbeat {
  /** Stops the heartbeat; resolves once no call is in flight. */
  stop(): Promise<void>
  readonly running: boolean
}

export interface HeartbeatOptions {
  intervalSeconds: number
  /** Called once when the seat is lost (a refusal, or no valid answer even with grace); the heartbeat then stops. */
  onLost: (why: { reason: Refusal } | { error: KeywardError }) => void
  /** Each answer (valid, possibly offline) after a beat. */
  onValid?: (result: ValidateResult & { valid: true }) => void
  deviceName?: string
  appVersion?: string
}

export function startHeartbeat(validate: () => Promise<ValidateResult>, options: HeartbeatOptions): Heartbeat {
  if (!(options.intervalSeconds > 0)) throw new TypeError('heartbeat: intervalSeconds must be positive')
  let timer: ReturnType<typeof setTimeout> | undefined
  let inFlight: Promise<void> | undefined
  let running = true
  const finish = () => {
    running = false
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
  }
  const beat = async () => {
    timer = undefined
    try {
      const result = await validate()
      if (!running) return
      if (result.valid) options.onValid?.(result)
      else {
        finish()
        options.onLost({ reason: result.reason })
      }
    } catch (err) {
      if (!running) return
      finish()
      options.onLost({ error: err instanceof KeywardError ? err : new KeywardError({ code: 'unexpected_error', detail: String(err), cause: err }) })
    }
  }
  const schedule = () => {
    if (!running) return
    timer = setTimeout(() => {
      inFlight = beat().finally(() => {
        inFlight = undefined
        schedule()
      })
    }, options.intervalSeconds * 1000)
  }
  schedule()
  return {
    get running() {
      return running
    },
    async stop() {
      finish()
      await inFlight
    },
  }
}
