-- Air-gapped activation and deactivation (docs/integrating.md, "Customers without a network"; docs/api.md,
-- "Air-gapped activation"). A device that never reaches Keyward sends a request code (KWREQ1) through
-- a second, online machine; the answer is an offline license for its seat (KWRES1). Later it proves
-- its own deactivation with a code signed by its device key (KWDEA1) and gets a signed receipt.
--
-- - offline_requests: one row per request code that took (or found) a seat. The code itself is never
--   stored (it carries the key value): only its SHA-256, the primary key, so the same code sent to
--   every node at once finds one seat (docs/decisions.md, "Air-gapped requests"). It names the
--   activation, the offline license issued for it (offline_licenses), and the device's Ed25519 public
--   key, which verifies the device's deactivation code. A release by such a code records its SHA-256
--   and time, so the same code again answers the same receipt.
-- - activations.device_public_key: the device key of the latest request that claimed the seat (null:
--   not an air-gapped activation); the console marks such seats.
-- - products.offline_portal: the product's end-user page (GET /portal/:product_id/offline), off by default.
create table offline_requests (
  request_sha256        text primary key,
  account_id            text not null references accounts (id) on delete cascade,
  key_id                text not null references license_keys (id) on delete cascade,
  activation_id         text not null references activations (id) on delete cascade,
  license_id            text not null unique references offline_licenses (id) on delete cascade,
  -- raw 32-byte Ed25519 key, base64url
  device_public_key     text not null,
  created_at            timestamptz not null default now(),
  deactivation_sha256   text,
  released_at           timestamptz,
  check ((deactivation_sha256 is null) = (released_at is null))
);
create index offline_requests_activation on offline_requests (activation_id);

alter table activations add column device_public_key text;

alter table products add column offline_portal boolean not null default false;

-- Events of an air-gapped device's codes: actor {type: "offline", id: <activation id>}.
alter table events drop constraint if exists events_actor_type_check;
alter table events add constraint events_actor_type_check
  check (actor_type in ('api_key', 'operator', 'device', 'system', 'connector', 'offline'));
