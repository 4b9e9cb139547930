-- Metered keys (credits). The key row is the record of the balance:
--   credits_remaining: null = unmetered; else the credits neither spent nor leased to a node
--   credits_refill:    null or {amount, interval, day_of_month, mode}; applied from the period boundary
--                      when the balance is next read or written (core/credits.ts), never by a job
--   credits_since:     the last refill boundary applied (or when the rule was set)
--   credits_epoch:     bumped by a `set` (POST /credits, PATCH credits): a lease of an older epoch is void,
--                      its unspent credits are not given back
--   credits_debt:      what a `subtract` could not take from the record because nodes held it in
--                      leases: their returns pay it first
--   credits_exhausted: key.credits_exhausted was emitted and the balance has not been above 0 since
alter table license_keys
  add column credits_remaining bigint check (credits_remaining between 0 and 1000000000000),
  add column credits_refill    jsonb,
  add column credits_since     timestamptz,
  add column credits_epoch     integer not null default 0,
  add column credits_debt      bigint not null default 0,
  add column credits_exhausted boolean not null default false;

-- A policy's credits: null or {initial, refill}, copied into each key created with it.
alter table policies add column credits jsonb;

-- Credits a node took from a key's record to spend from memory (a lease). `held` is what the node has
-- not spent yet, written by the node every FLUSH_INTERVAL_MS (GET /v1/keys/:id adds it to the record);
-- the row goes when the node gives the rest back. A row whose node stopped writing it (killed) is what
-- that crash stranded: an under-grant, never spent again.
create table credit_leases (
  id         text primary key,
  key_id     text not null references license_keys (id) on delete cascade,
  node_id    text not null,
  epoch      integer not null,
  held       bigint not null,
  updated_at timestamptz not null default now()
);
create index credit_leases_key on credit_leases (key_id);

alter table analytics_daily_validations add column credits_exhausted bigint not null default 0;

-- Credits consumed per account, UTC day, product and key (the analytics' credits chart), written by
-- each node's flush job like the validation counts.
create table analytics_daily_credits (
  account_id text not null references accounts (id) on delete cascade,
  day        date not null,
  product_id text not null,
  key_id     text not null,
  consumed   bigint not null default 0,
  primary key (account_id, day, product_id, key_id)
);
