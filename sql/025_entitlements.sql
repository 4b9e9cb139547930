-- Entitlements and what happens after expiry, as settings of a key (the key's own values; policies,
-- which keys may inherit them from, come in a later file).
--   entitlements:  the key's own map {code: value}; a null value removes a code its policy gives
--   grace_seconds: after expires_at, validate stays valid this long (marked expired); null = default 0
--   after_expiry:  'refuse' or 'keep' (valid forever after expiry, marked expired); null = default refuse
alter table license_keys
  add column entitlements  jsonb not null default '{}',
  add column grace_seconds integer check (grace_seconds between 0 and 31536000),
  add column after_expiry  text check (after_expiry in ('refuse', 'keep'));

-- Whether validate refuses a key for its expiry: past expires_at plus the grace, unless it is kept.
-- (The stored and effective status say `expired` from expires_at on; a key in grace or kept is
-- still answered valid, marked expired.)
create function key_expiry_refused(expires_at timestamptz, grace_seconds integer, after_expiry text) returns boolean
  language sql stable as $$
    select expires_at is not null and coalesce(after_expiry, 'refuse') = 'refuse'
       and expires_at + make_interval(secs => coalesce(grace_seconds, 0)) <= now()
  $$;

alter table analytics_daily_validations add column entitlements_missing bigint not null default 0;
