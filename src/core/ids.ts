// The shape of every id the service mints: `<prefix>_` + a 26-character ULID in Crockford base32
// (upper case, no I, L, O, U). No imports: the console's browser bundle reads this file to check an id
// from its address before putting it into an API path.
export type IdPrefix = 'acct' | 'ak' | 'prod' | 'key' | 'act' | 'wh' | 'evt' | 'whd' | 'lic' | 'req' | 'pol' | 'con' | 'cev' | 'mail' | 'rly'

const ID_RE = /^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$/

/** A well-formed id of the given prefix; anything else is treated as unknown (404) by callers. */
export const isId = (prefix: IdPrefix, id: string) => id.startsWith(`${prefix}_`) && ID_RE.test(id)
