-- Webhooks: endpoints, the delivery queue (one row per event × subscribed webhook, written by the
-- outbox in the event's own transaction) and the log of every attempt.

create table webhooks (
  id             text primary key,
  account_id     text not null references accounts (id) on delete cascade,
  url            text not null,
  events         text[] not null,
  -- `whsec_…` sealed with SECRET_KEY (AES-256-GCM): needed in clear to sign, so encrypted, not hashed
  secret_sealed  text not null,
  is_active      boolean not null default true,
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now()
);
create index webhooks_account on webhooks (account_id, created_at, id);

-- The queue. Deleting a webhook deletes its deliveries (cascade), so nothing is signed with its
-- secret afterwards. `next_attempt_at` doubles as the lease of a claimed delivery: a node that dies
-- mid-attempt leaves it due again once the lease runs out.
create table webhook_deliveries (
  id               bigserial primary key,
  webhook_id       text not null references webhooks (id) on delete cascade,
  event_id         text not null references events (id) on delete cascade,
  account_id       text not null,
  status           text not null default 'pending' check (status in ('pending', 'succeeded', 'failed', 'cancelled')),
  attempts         integer not null default 0,
  next_attempt_at  timestamptz not null default now(),
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  unique (webhook_id, event_id)
);
create index webhook_deliveries_due on webhook_deliveries (next_attempt_at, id) where status = 'pending';

-- Every attempt (queue deliveries and /test sends), newest first per webhook for GET /v1/webhooks/:id.
create table webhook_attempts (
  id           text primary key,
  webhook_id   text not null references webhooks (id) on delete cascade,
  delivery_id  bigint references webhook_deliveries (id) on delete cascade,
  account_id   text not null,
  event_id     text not null,
  event_type   text not null,
  attempt      integer not null,
  status_code  integer,
  success      boolean not null,
  duration_ms  integer not null,
  error        text,
  created_at   timestamptz not null default now()
);
create index webhook_attempts_webhook on webhook_attempts (webhook_id, created_at desc, id desc);
create index webhook_attempts_delivery on webhook_attempts (delivery_id);
