-- Foundation schema: accounts, API keys, products, license keys, activations, the event outbox and
-- idempotency records. Secrets are stored only as SHA-256 hashes (API tokens, key values).

create table accounts (
  id          text primary key,
  name        text not null,
  plan        text not null check (plan in ('free', 'hobby', 'starter', 'growth', 'enterprise')),
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);

create table api_keys (
  id            text primary key,
  account_id    text not null references accounts (id) on delete cascade,
  name          text not null,
  scope         text not null,
  token_hash    text not null unique,
  token_prefix  text not null,
  created_at    timestamptz not null default now(),
  last_used_at  timestamptz
);
create index api_keys_account on api_keys (account_id, created_at);

create table products (
  id           text primary key,
  account_id   text not null references accounts (id) on delete cascade,
  name         text not null,
  slug         text not null,
  description  text,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  unique (account_id, slug)
);
create index products_account on products (account_id, created_at, id);

create table license_keys (
  id                text primary key,
  account_id        text not null references accounts (id) on delete cascade,
  product_id        text not null references products (id) on delete cascade,
  key_hash          text not null unique,
  key_prefix        text not null,
  plan              text,
  -- stored status; the effective status also turns 'active' into 'expired' once expires_at passed
  status            text not null default 'active' check (status in ('active', 'revoked', 'expired')),
  activation_limit  integer not null,
  expires_at        timestamptz,
  metadata          jsonb not null default '{}',
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now(),
  revoked_at        timestamptz,
  revoke_reason     text
);
create index license_keys_account_created on license_keys (account_id, created_at desc, id desc);
create index license_keys_product_status on license_keys (product_id, status);
create index license_keys_expiring on license_keys (expires_at) where status = 'active' and expires_at is not null;

create table activations (
  id                   text primary key,
  account_id           text not null references accounts (id) on delete cascade,
  key_id               text not null references license_keys (id) on delete cascade,
  product_id           text not null,
  device_fingerprint   text not null,
  app_version          text,
  country              text,
  status               text not null default 'active' check (status in ('active', 'deactivated')),
  activated_at         timestamptz not null default now(),
  last_validated_at    timestamptz,
  deactivated_at       timestamptz,
  deactivation_reason  text
);
-- one active activation per device and key: the database itself refuses a double slot
create unique index activations_one_active on activations (key_id, device_fingerprint) where status = 'active';
create index activations_key on activations (key_id, activated_at, id);
create index activations_product on activations (product_id);
create index activations_account_time on activations (account_id, activated_at);

-- The outbox: every state change writes its event in the same transaction.
create table events (
  id          text primary key,
  seq         bigserial unique,
  account_id  text not null references accounts (id) on delete cascade,
  type        text not null,
  data        jsonb not null,
  created_at  timestamptz not null default now()
);
create index events_account_time on events (account_id, created_at);

create table idempotency_keys (
  account_id    text not null references accounts (id) on delete cascade,
  idem_key      text not null,
  request_hash  text not null,
  status_code   integer,
  response      jsonb,
  created_at    timestamptz not null default now(),
  primary key (account_id, idem_key)
);
create index idempotency_keys_created on idempotency_keys (created_at);
