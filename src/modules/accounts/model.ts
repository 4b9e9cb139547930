import { OneOf, t, Timestamp } from '../../http/schema'
import { PLANS } from '../../core/plans'

export const PlanName = OneOf(PLANS, { description: 'Account plan' })

export const Account = t.Object({
  id: t.String({ examples: ['acct_01JD7Z3X9K8Q4W2E6R5T1Y0U3I'] }),
  name: t.String(),
  plan: PlanName,
  created_at: Timestamp,
})
export type Account = typeof Account.static

export const AccountWithUsage = t.Composite([
  Account,
  t.Object({
    usage: t.Object({
      products: t.Integer(),
      keys: t.Integer(),
      active_keys: t.Integer(),
      activations: t.Integer(),
      api_keys: t.Integer(),
    }),
  }),
])

export const CreateAccountBody = t.Object({
  name: t.String({ minLength: 1, maxLength: 200 }),
  plan: t.Optional(PlanName),
})

export const UpdateAccountBody = t.Object({
  name: t.Optional(t.String({ minLength: 1, maxLength: 200 })),
  plan: t.Optional(PlanName),
})
