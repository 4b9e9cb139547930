// Structured JSON logs (pino). Never pass a token, key value or secret to a log call.
import pino from 'pino'

export type Logger = pino.Logger

export function createLogger(level: string): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ['authorization', 'token', 'key', 'key_value', 'secret', '*.authorization', '*.token'], censor: '[redacted]' },
    },
    pino.destination({ sync: false }),
  )
}
