-- Payment connectors: a provider's webhooks (Stripe, Paddle, Lemon Squeezy) issue, renew and end keys.
-- The inbox: each provider event is stored by (connector, provider event id) before it is acted on, in
-- the same transaction as the key writes and the outgoing events; the unique index is what makes a
-- provider event processed exactly once across nodes and concurrent redeliveries.
alter table events drop constraint if exists events_actor_type_check;
alter table events add constraint events_actor_type_check
  check (actor_type in ('api_key', 'operator', 'device', 'system', 'connector'));

create table connectors (
  id             text primary key,
  account_id     text not null references accounts (id) on delete cascade,
  provider       text not null check (provider in ('stripe', 'paddle', 'lemonsqueezy')),
  name           text not null,
  -- the provider's webhook signing secret, AES-256-GCM under SECRET_KEY (infra/crypto.ts seal)
  secret_sealed  text not null,
  mappings       jsonb not null default '[]',
  email_keys     boolean not null default false,
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now()
);
create index connectors_account on connectors (account_id, created_at);

-- Every event received on a connector, with what it did. `provider_event_id` is null for a refusal
-- (bad signature, malformed payload, unmapped price): those are shown, not claimed, so a redelivery
-- after the vendor fixes the cause is processed.
create table connector_events (
  id                 text primary key,
  connector_id       text not null references connectors (id) on delete cascade,
  provider_event_id  text,
  type               text,
  outcome            text not null,
  detail             text not null default '',
  key_ids            text[] not null default '{}',
  received_at        timestamptz not null default now()
);
create unique index connector_events_once on connector_events (connector_id, provider_event_id);
create index connector_events_recent on connector_events (connector_id, received_at desc);

-- Which keys a provider object (subscription, order, payment, invoice, checkout session) produced:
-- how a renewal, cancellation, refund or dispute finds its keys from the payload alone.
create table connector_keys (
  connector_id  text not null references connectors (id) on delete cascade,
  ref           text not null,
  key_id        text not null references license_keys (id) on delete cascade,
  primary key (connector_id, ref, key_id)
);
create index connector_keys_key on connector_keys (key_id);

-- Key delivery by email, an outbox of its own: the key value is sealed only until the SMTP server
-- accepts the mail, then erased (value_sealed null). Workers on any node claim due rows with
-- FOR UPDATE SKIP LOCKED.
create table connector_mails (
  id               text primary key,
  connector_id     text not null references connectors (id) on delete cascade,
  account_id       text not null,
  key_id           text not null references license_keys (id) on delete cascade,
  to_email         text not null,
  value_sealed     text,
  status           text not null default 'pending' check (status in ('pending', 'sent', 'failed')),
  attempts         integer not null default 0,
  last_error       text,
  next_attempt_at  timestamptz not null default now(),
  created_at       timestamptz not null default now(),
  sent_at          timestamptz
);
create index connector_mails_due on connector_mails (next_attempt_at) where status = 'pending';
create index connector_mails_connector on connector_mails (connector_id, created_at desc);
