-- The webhook queue written for Postgres's cheapest paths (issue 26: Postgres was most of a delivery's
-- CPU, ≈60 µs of ≈140 µs, because each delivery row was rewritten in full twice).
--
-- 1. The lease is its own column, `leased_until`, in no index. Before, the claim moved
--    `next_attempt_at` (and `updated_at`), both indexed, so every claim wrote a new row version plus an
--    entry in each of the table's five indexes. Now the claim changes no indexed column, and with room
--    on the page (the fillfactor below) the update is HOT: one heap write, no index entry. A row is due
--    when it is pending, `next_attempt_at` has passed and it is not leased (`leased_until` null or
--    passed); the due index still orders the scan, and the few leased rows at its head (the ones being
--    sent) are skipped.
-- 2. A delivery that succeeded is deleted instead of updated to 'succeeded' (a delete writes no index
--    entry; the update, which changes `status`, wrote four). What it was is in its attempt log, which is
--    what the API shows; failed and cancelled deliveries stay as rows, as before, until retention.
--    The attempt log therefore no longer references the delivery row by foreign key (it would cascade
--    the log away); `delivery_id` stays as the delivery's number, for retention and for reading.
-- 3. Pages are filled to 40% on insert, leaving room for the lease's HOT update of every row on them
--    (≈150-byte rows: ≈20 inserted per page, room for as many new versions). The table is a queue: its
--    rows are short-lived, so the space is reused rather than grown.
--
-- Measured on the development machine (2 cores, 20,000 due, claims and results of 500): Postgres CPU
-- per delivery 28.5 + 37.5 µs (claim + result) before, 15 + 14.5 µs after.

alter table webhook_deliveries add column leased_until timestamptz;
alter table webhook_deliveries set (fillfactor = 40);
alter table webhook_attempts drop constraint webhook_attempts_delivery_id_fkey;

-- Rows leased by the previous code carry their lease in next_attempt_at: they are due when it passes,
-- as before. Nothing to convert.

create or replace function webhook_claim_due(claim_limit int, lease_secs float8)
returns table (
  id bigint, attempts int, webhook_id text, url text, secret_sealed text,
  event_id text, type text, data jsonb, actor_type text, actor_id text, created_at timestamptz
)
language plpgsql volatile
set enable_bitmapscan = off
set enable_seqscan = off
as $$
#variable_conflict use_column
begin
  return query with async as (
    select set_config('synchronous_commit', 'off', true)
  ), due as (
    select d.id from webhook_deliveries d
    where d.status = 'pending' and d.next_attempt_at <= now()
      and (d.leased_until is null or d.leased_until <= now())
    order by d.next_attempt_at, d.id
    limit claim_limit
    for update skip locked
  ), claimed as (
    -- `status` is set to itself for an active webhook: an unchanged value keeps the update HOT
    update webhook_deliveries d set
      status = case when w.is_active then d.status else 'cancelled' end,
      leased_until = case when w.is_active then now() + make_interval(secs => lease_secs) else d.leased_until end,
      updated_at = case when w.is_active then d.updated_at else now() end
    from due, webhooks w, async
    where d.id = due.id and w.id = d.webhook_id
    returning d.id, d.attempts, d.webhook_id, d.event_id, w.is_active, w.url, w.secret_sealed, d.next_attempt_at as due_at
  )
  select c.id, c.attempts, c.webhook_id, c.url, c.secret_sealed,
    e.id, e.type, e.data, e.actor_type, e.actor_id, e.created_at
  from claimed c join events e on e.id = c.event_id
  where c.is_active
  order by c.due_at, c.id;
end
$$;

-- The attempt log's statement (modules/webhooks/queue.ts logAttempts) as a function too, for the same
-- reason as the claim: its plan. Each result row must find its delivery row by primary key, one probe
-- per row. Left to the planner, such a statement can run as a sequential scan of the queue (stale
-- statistics saying the table is small), and a plain-SQL draft of this one probed the index with the
-- whole batch's id array once per row (≈190 µs per logged retry in a batch of 500). With sequential and
-- bitmap scans off for this statement only, every join is a primary-key probe: 17-19 µs of Postgres CPU
-- per logged success, ≈31 µs per logged retry (docs/performance.md, issue 26 third pass).
--
-- `batch` is the results as one JSON array text (see queue.ts). Rows are locked in id order first, like
-- every multi-row write on the queue (no deadlock between them), and only those whose attempt count is
-- still the one seen at claim time are written (a late node's result after a takeover is dropped). A
-- success deletes the delivery; a retry or a final failure updates it and lifts its lease; a delivery
-- cancelled meanwhile stays cancelled unless the attempt succeeded. Returns the recorded delivery ids.
create function webhook_log_attempts(batch text)
returns table (delivery_id bigint)
language plpgsql volatile
set enable_bitmapscan = off
set enable_seqscan = off
as $$
#variable_conflict use_column
begin
  return query with input as (
    select * from json_to_recordset(batch::json) as t(delivery_id bigint, prev int, status text, delay_secs float8,
      attempt_id text, event_type text, status_code int, success bool, duration_ms int, error text)
  ), locked as (
    select d.id, d.attempts from webhook_deliveries d
    where d.id = any (array(select i.delivery_id from input i)) order by d.id for update
  ), current as (
    select i.* from input i join locked l on l.id = i.delivery_id and l.attempts = i.prev
  ), done as (
    delete from webhook_deliveries w using current i
    where w.id = i.delivery_id and i.status = 'succeeded'
    returning w.id, w.webhook_id, w.account_id, w.event_id, i.attempt_id, i.event_type, i.prev, i.status_code,
      i.success, i.duration_ms, i.error
  ), moved as (
    update webhook_deliveries w set
      status = case when w.status = 'cancelled' then 'cancelled' else i.status end,
      attempts = i.prev + 1,
      next_attempt_at = case when i.status = 'pending' then now() + make_interval(secs => i.delay_secs) else w.next_attempt_at end,
      leased_until = null,
      updated_at = now()
    from current i
    where w.id = i.delivery_id and i.status <> 'succeeded'
    returning w.id, w.webhook_id, w.account_id, w.event_id, i.attempt_id, i.event_type, i.prev, i.status_code,
      i.success, i.duration_ms, i.error
  ), d as (
    -- each write returns its input row with it: no join back to the input (planned as a nested loop
    -- over both, it cost as much as the rest of the statement)
    select * from done union all select * from moved
  )
  insert into webhook_attempts as a
    (id, webhook_id, delivery_id, account_id, event_id, event_type, attempt, status_code, success, duration_ms, error)
  select d.attempt_id, d.webhook_id, d.id, d.account_id, d.event_id, d.event_type, d.prev + 1, d.status_code, d.success,
         d.duration_ms, d.error
  from d
  returning a.delivery_id;
end
$$;
