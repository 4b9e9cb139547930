-- Policies: what a key inherits. A key references at most one policy (of its product); its own
-- settings override the policy's. The policy is shared state, read beside the key (never copied into
-- it), so an edit is one row whatever the number of keys.
create table policies (
  id                    text primary key,
  account_id            text not null references accounts (id) on delete cascade,
  product_id            text not null references products (id) on delete cascade,
  name                  text not null,
  plan                  text,
  activation_limit      integer not null default 3,
  duration              text,
  grace_seconds         integer not null default 0,
  after_expiry          text not null default 'refuse' check (after_expiry in ('refuse', 'keep')),
  release_after_seconds integer,
  deactivations_allowed integer,
  entitlements          jsonb not null default '{}',
  metadata              jsonb not null default '{}',
  created_at            timestamptz not null default now(),
  updated_at            timestamptz not null default now()
);
create index policies_account_product on policies (account_id, product_id, created_at, id);

-- own_fields: which of plan, activation_limit, release_after_seconds and deactivations_allowed the
-- key sets itself (their columns then hold the key's value; otherwise the policy's applies). For a key
-- without a policy the columns are its values, as before policies existed.
alter table license_keys
  add column policy_id  text references policies (id),
  add column own_fields text[] not null default '{}';
create index license_keys_policy on license_keys (policy_id, created_at desc, id desc) where policy_id is not null;

-- expiry_basis first_activation: a new key's expiry starts at its first activation. The key keeps the
-- policy's duration in pending_duration until then (a later edit of the policy moves nothing), and the
-- first activation, under the key row lock, sets expires_at and clears it: exactly once.
alter table policies
  add column expiry_basis text not null default 'creation' check (expiry_basis in ('creation', 'first_activation')),
  add column one_key_per_device boolean not null default false;
alter table license_keys add column pending_duration text;

-- one_key_per_device: the first key of the policy each device activated. Written in the activation's
-- transaction; the primary key makes two racing keys (on any nodes) exclusive.
create table policy_devices (
  policy_id          text not null references policies (id) on delete cascade,
  device_fingerprint text not null,
  key_id             text not null references license_keys (id) on delete cascade,
  created_at         timestamptz not null default now(),
  primary key (policy_id, device_fingerprint)
);
create index policy_devices_key on policy_devices (key_id);

alter table analytics_daily_validations add column device_already_used bigint not null default 0;
