// Every failure the client reports is a KeywardError with a stable `code` to branch on. Codes from the
// service (problem+json `code`) pass through unchanged; the client adds its own for what happens before
// or after the service answers: `unreachable`, `bad_signature`, `signing_key_revoked`, `clock_skew`, `no_key`,
// `invalid_public_key`.
// Only a verified (signed) answer's problem `code` ever becomes an error's code: an unsigned or forged
// answer of any status is a SignatureError, whatever its body says.

export interface KeywardErrorInit {
  code: string
  status?: number
  detail?: string
  requestId?: string | null
  retryAfter?: number | null
  /** True when the error answer itself carried a verified signature (the service really said it). */
  signed?: boolean
  cause?: unknown
}

export class KeywardError extends Error {
  /** The service's problem `code` (`rate_limited`, `unauthorized`, ...) or a client code. */
  readonly code: string
  /** The HTTP status, or 0 when there was no answer. */
  readonly status: number
  readonly detail: string
  readonly requestId: string | null
  /** Seconds to wait before asking again (429 only). */
  readonly retryAfter: number | null
  readonly signed: boolean

  constructor(init: KeywardErrorInit) {
    super(init.detail ? `${init.code}: ${init.detail}` : init.code, init.cause === undefined ? undefined : { cause: init.cause })
    this.name = 'KeywardError'
    this.code = init.code
    this.status = init.status ?? 0
    this.detail = init.detail ?? ''
    this.requestId = init.requestId ?? null
    this.retryAfter = init.retryAfter ?? null
    this.signed = init.signed ?? false
  }
}

/** The service could not be reached (network error, timeout) or kept answering 5xx. */
export class UnreachableError extends KeywardError {
  constructor(init: Omit<KeywardErrorInit, 'code'> & { code?: string }) {
    super({ code: 'unreachable', ...init })
    this.name = 'UnreachableError'
  }
}

/**
 * An answer that is unsigned, forged or for another request (another key, device or body): never
 * trusted, whatever its status (kept in `status`). For grace it counts as no answer at all.
 */
export class SignatureError extends KeywardError {
  constructor(detail: string, requestId: string | null = null, status = 0, code = 'bad_signature') {
    super({ code, detail, requestId, status })
    this.name = 'SignatureError'
  }
}

/**
 * An answer signed by a signing key that the account revoked (the key set says so), even with a valid
 * certificate: a SignatureError (never trusted, no better than a forgery for grace) with its own code,
 * `signing_key_revoked`, and the revoked key's `kid`.
 */
export class RevokedSignerError extends SignatureError {
  readonly kid: string
  constructor(kid: string, detail: string, requestId: string | null = null, status = 0) {
    super(detail, requestId, status, 'signing_key_revoked')
    this.name = 'RevokedSignerError'
    this.kid = kid
  }
}

/**
 * A genuine answer signed at a time more than 5 minutes from the device's clock: the clock is wrong
 * (tell the user to set it right). `skewMs` is local clock minus the service's (positive: ahead).
 */
export class ClockSkewError extends KeywardError {
  readonly skewMs: number
  constructor(skewMs: number, requestId: string | null = null) {
    const minutes = Math.round(Math.abs(skewMs) / 60_000)
    super({
      code: 'clock_skew',
      detail: `this device's clock is about ${minutes} minutes ${skewMs > 0 ? 'ahead of' : 'behind'} the license server's: set the date and time right and try again`,
      requestId,
      signed: true,
    })
    this.name = 'ClockSkewError'
    this.skewMs = skewMs
  }
}

/** 429: the account's daily validate quota is used up; `retryAfter` says for how long. */
export class RateLimitedError extends KeywardError {
  constructor(init: Omit<KeywardErrorInit, 'code'>) {
    super({ code: 'rate_limited', ...init })
    this.name = 'RateLimitedError'
  }
}
