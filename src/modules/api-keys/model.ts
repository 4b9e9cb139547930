import { NullableTimestamp, OneOf, PlainText, t, Timestamp } from '../../http/schema'
import { SCOPES } from '../../core/scopes'

export const ScopeName = OneOf(SCOPES)

export const ApiKey = t.Object({
  id: t.String(),
  name: t.String(),
  scope: ScopeName,
  token_prefix: t.String({ description: 'First characters of the token, for recognising it' }),
  created_at: Timestamp,
  last_used_at: NullableTimestamp,
})
export type ApiKey = typeof ApiKey.static

export const ApiKeyWithToken = t.Composite([ApiKey, t.Object({ token: t.String({ description: 'Shown once' }) })])
export type ApiKeyWithToken = typeof ApiKeyWithToken.static

export const CreateApiKeyBody = t.Object({
  name: PlainText(1, 200, { minLength: 1, maxLength: 200, description: 'A label for the API key: 1..200 characters, no control characters' }),
  scope: ScopeName,
})

export const ApiKeyList = t.Object({ data: t.Array(ApiKey) })
export type ApiKeyList = typeof ApiKeyList.static
