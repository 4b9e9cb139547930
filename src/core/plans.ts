// The plan table of the contract. null = unlimited.
export const PLANS = ['free', 'hobby', 'starter', 'growth', 'enterprise'] as const
export type Plan = (typeof PLANS)[number]

export interface PlanLimits {
  products: number | null
  webhooks: number | null
  validationsPerDay: number | null
  analytics: boolean
}

export const PLAN_LIMITS: Record<Plan, PlanLimits> = {
  free: { products: 1, webhooks: 0, validationsPerDay: 500, analytics: false },
  hobby: { products: 3, webhooks: 3, validationsPerDay: 10_000, analytics: true },
  starter: { products: 10, webhooks: 10, validationsPerDay: 50_000, analytics: true },
  growth: { products: null, webhooks: null, validationsPerDay: 200_000, analytics: true },
  enterprise: { products: null, webhooks: null, validationsPerDay: null, analytics: true },
}
