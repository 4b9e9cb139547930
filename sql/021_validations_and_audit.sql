-- Validate answers per account, UTC day and product, by outcome (GET /v1/analytics/validations).
-- Counted in memory on each node and added here by the node's flush job (one upsert per flush), so
-- validate does no I/O for it. product_id '' holds the answers that belong to no product (not_found,
-- rate_limited). No foreign key on the product: like the other rollups, the history outlives it.
create table analytics_daily_validations (
  account_id        text not null references accounts (id) on delete cascade,
  day               date not null,
  product_id        text not null,
  valid             bigint not null default 0,
  not_found         bigint not null default 0,
  revoked           bigint not null default 0,
  expired           bigint not null default 0,
  activation_limit  bigint not null default 0,
  rate_limited      bigint not null default 0,
  primary key (account_id, day, product_id)
);

-- The audit trail (GET /v1/events): who made each change, and the objects it is about.
-- `actor_type`/`actor_id`: api_key (its ak_ id), operator, device or system (id null for the last three).
-- `resource_ids`: the ids of the key, product, activation, webhook or API key the event is about, filled
-- at emit time (an activation's events also carry its key), matched with `@>` through the GIN index.
-- Events written before this migration are attributed to the system and match no resource id.
alter table events
  add column actor_type text not null default 'system' check (actor_type in ('api_key', 'operator', 'device', 'system')),
  add column actor_id text,
  add column resource_ids text[] not null default '{}';
create index events_account_seq on events (account_id, seq desc);
create index events_resource_ids on events using gin (resource_ids);
