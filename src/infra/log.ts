// Structured JSON logs (pino). Never pass a token, key value or secret to a log call.
import pino from 'pino'

export type Logger = pino.Logger

/** `destination`: a file descriptor or path (benchmarks send the logs to /dev/null); stdout by default. */
export function createLogger(level: string, destination: number | string = 1): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ['authorization', 'token', 'key', 'key_value', 'secret', '*.authorization', '*.token'], censor: '[redacted]' },
    },
    pino.destination({ dest: destination, sync: false }),
  )
}
