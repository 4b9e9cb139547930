-- Relays (docs/api.md, "Relays"): a small Keyward server a vendor's customer runs on its own network,
-- licensed for a number of seats of one key. Its seats count as activations of the key: they are taken
-- under the key's row lock (modules/activations/relay-seats.ts), so a key's active activations plus its
-- live relays' seats never exceed activation_limit.
--
-- - public_key: the relay's raw 32-byte Ed25519 key, standard base64 (it verifies the relay's check-ins
--   and is certified by the relay license). A relay key has one live relay per license key.
-- - license_id: the relay license's id, the same for every renewal; issued_at/expires_at: the latest.
-- - deleted_at: a deleted relay's seats are free; its row stays so that its check-in can be verified
--   and answered `deleted`.
-- - last_check_in_at, last_leases: the last check-in; relay_usage: per relay and UTC day, the highest
--   peak reported and the number of check-ins (for the relay's `peak` over 30 days).
create table relays (
  id                  text primary key,
  account_id          text not null references accounts (id) on delete cascade,
  key_id              text not null references license_keys (id) on delete cascade,
  product_id          text not null,
  name                text not null,
  public_key          text not null,
  device_fingerprint  text not null,
  components          jsonb not null,
  seats               integer not null check (seats > 0),
  lease_seconds       integer not null check (lease_seconds between 60 and 86400),
  ttl_seconds         integer not null check (ttl_seconds between 3600 and 31536000),
  license_id          text not null unique,
  issued_at           timestamptz not null,
  expires_at          timestamptz not null,
  created_at          timestamptz not null default now(),
  updated_at          timestamptz not null default now(),
  deleted_at          timestamptz,
  last_check_in_at    timestamptz,
  last_leases         integer
);
-- the same request again (same relay key, same license key) finds its live relay
create unique index relays_live_key on relays (key_id, public_key) where deleted_at is null;
-- the seats a key's live relays hold, summed under the key's lock on every seat decision
create index relays_live_seats on relays (key_id) include (seats) where deleted_at is null;
create index relays_account on relays (account_id, created_at);

create table relay_usage (
  relay_id   text not null references relays (id) on delete cascade,
  day        date not null,
  peak       integer not null,
  check_ins  integer not null,
  primary key (relay_id, day)
);
