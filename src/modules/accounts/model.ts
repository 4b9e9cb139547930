import { OneOf, PlainText, q, t, Timestamp } from '../../http/schema'
import { PLANS } from '../../core/plans'

/** 1..200 characters, no control characters. */
const AccountName = PlainText(1, 200, { minLength: 1, maxLength: 200, description: 'The account\'s name: 1..200 characters, no control characters' })

export const PlanName = OneOf(PLANS, { description: 'Account plan' })

export const Account = t.Object({
  id: t.String({ examples: ['acct_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  name: t.String(),
  plan: PlanName,
  created_at: Timestamp,
})
export type Account = typeof Account.static

export const Usage = t.Object({
  products: t.Integer(),
  keys: t.Integer({ description: 'Every license key, any status' }),
  active_keys: t.Integer({ description: 'Keys whose effective status is active' }),
  activations: t.Integer({ description: 'Every activation ever recorded, deactivated ones included' }),
  api_keys: t.Integer(),
})
export type Usage = typeof Usage.static

export const AccountWithUsage = t.Composite([Account, t.Object({ usage: Usage })])
export type AccountWithUsage = typeof AccountWithUsage.static

export const ListAccountsQuery = q.Object({
  q: q.Optional(
    q.String({ maxLength: 200, description: 'A case-insensitive prefix of the name, or a prefix of the id' }),
  ),
  // Bounded as on GET /v1/keys: page * page_size always fits the database's OFFSET.
  page: q.Optional(q.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
  page_size: q.Optional(q.Integer({ minimum: 1, maximum: 100, default: 20 })),
})

export const AccountPage = t.Object({
  data: t.Array(AccountWithUsage),
  page: t.Integer(),
  page_size: t.Integer(),
  total: t.Integer(),
  has_more: t.Boolean(),
})
export type AccountPage = typeof AccountPage.static

export const CreateAccountBody = t.Object({
  name: AccountName,
  plan: t.Optional(PlanName),
})

export const UpdateAccountBody = t.Object({
  name: t.Optional(AccountName),
  plan: t.Optional(PlanName),
})
