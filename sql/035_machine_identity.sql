-- Machine identity (docs/integrating.md, "Identifying machines"). A device may send `components`
-- ({name: sha256 hex}, 1..16); the key's `component_match` rule (inherited from its policy like the
-- other settings, core/key-settings.ts) says whether the components sent match an activation's.
--
-- - activations.components: the latest set sent for the activation's fingerprint (null: never sent).
--   With a rule on, a new fingerprint whose components match an activation's takes that activation
--   over (a rebind: same id, same seat); the fingerprints it replaced are remembered, newest first,
--   at most 8 (core/component-match.ts), and are refused from then on.
-- - activations.components_changed_at: when the stored set last changed (shown per device).
-- - component_match on keys and policies: null = inherit (the key) / default `off` (the policy).
alter table activations
  add column components jsonb,
  add column components_changed_at timestamptz,
  add column replaced_fingerprints text[] not null default '{}';

alter table license_keys
  add column component_match text check (component_match in ('off', 'any', 'two', 'most', 'all'));

alter table policies
  add column component_match text check (component_match in ('off', 'any', 'two', 'most', 'all'));

-- A replaced fingerprint is refused for its key: found by (key, fingerprint) among active activations.
create index activations_replaced on activations using gin (replaced_fingerprints) where status = 'active';

-- A policy always states its rule (as its other settings do): existing policies say `off`.
update policies set component_match = 'off' where component_match is null;
alter table policies alter column component_match set default 'off', alter column component_match set not null;

-- A rebind looks for the key's active activations that have components (under the key row lock).
create index activations_key_components on activations (key_id) where status = 'active' and components is not null;

-- Validate answers refused device_mismatch, per day (GET /v1/analytics/validations).
alter table analytics_daily_validations add column device_mismatch bigint not null default 0;

-- A rebind's change is in force on every node only once its invalidation is: until then (bounded,
-- should the rebinding node die first) no other fingerprint may take the activation over, so two
-- devices racing for one seat never both end up answered valid (modules/activations/identity.ts).
alter table activations add column rebind_held_until timestamptz;
