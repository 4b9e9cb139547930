-- Suspend, reinstate, reissue (keys). A suspension is its own columns beside the stored status, so
-- that the expiry sweeper, extend and revoke keep working on `status` unchanged: a key is suspended
-- while suspended_at is set, and revoke clears the suspension.
alter table license_keys
  add column suspended_at    timestamptz,
  add column suspend_reason  text,
  add column suspended_until timestamptz;

-- The reinstate sweep reads only suspensions with an end date.
create index license_keys_suspended_until on license_keys (suspended_until) where suspended_until is not null;

-- The effective status, one rule for every reader: revoked > suspended > expired > active. Stable (it
-- reads now()) and plain SQL, so the planner inlines it.
create function key_effective_status(status text, expires_at timestamptz, suspended_at timestamptz) returns text
  language sql stable as $$
    select case
      when status = 'revoked' then 'revoked'
      when suspended_at is not null then 'suspended'
      when status = 'expired' or expires_at <= now() then 'expired'
      else 'active' end
  $$;

-- Validate answers `suspended`: counted per day like the other refusals.
alter table analytics_daily_validations add column suspended bigint not null default 0;
