-- Customers and search (docs/api.md, "Customers and search"). A key may name who holds it: an e-mail
-- address (stored lower-cased), a name and the customer's id in the vendor's or the payment provider's
-- system; all null = no customer. `GET /v1/keys?q=` finds keys by id, external id, customer id, key
-- prefix, or a part of the customer's e-mail or name, each through an index (docs/decisions.md,
-- "Finding keys by customer"):
--
-- - equality on id (primary key), external_id (license_keys_external_id) and customer_external_id;
-- - the start of key_prefix: a btree in byte order (collate "C"), read as a range;
-- - "contains, ignoring case" on e-mail and name: trigram GIN (pg_trgm, a trusted extension in
--   Postgres 13+; PGlite loads it from its contrib bundle, src/infra/db.ts).
create extension if not exists pg_trgm;

alter table license_keys
  add column customer_email text check (customer_email is null or (length(customer_email) <= 254 and customer_email = lower(customer_email))),
  add column customer_name text check (customer_name is null or char_length(customer_name) between 1 and 200),
  add column customer_external_id text check (customer_external_id is null or char_length(customer_external_id) between 1 and 200);

create index license_keys_customer_external_id on license_keys (account_id, customer_external_id) where customer_external_id is not null;
create index license_keys_account_prefix on license_keys (account_id, (key_prefix collate "C"));
create index license_keys_customer_text on license_keys using gin (customer_email gin_trgm_ops, customer_name gin_trgm_ops);
