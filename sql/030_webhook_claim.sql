-- The webhook claim (modules/webhooks/queue.ts claimDue) as a function, for one reason: its plan.
-- The due rows must be read from webhook_deliveries_due in index order, stopping at the limit. With
-- stale statistics (a table that grew from nothing in one burst, or a queue that is mostly finished
-- rows when the statistics were taken) the planner expects a few due rows and prefers a bitmap scan of
-- every due row plus a sort: each claim then costs time in proportion to the whole backlog (measured
-- 5-90 ms per claim of 64 rows with 20,000 due, against 1 ms with the index scan), which bounded
-- delivery under load. A statement cannot change the planner settings it is planned with; a
-- function's SET clause can, for exactly this statement and nothing else on the connection.
--
-- Otherwise the statement is the one queue.ts documents: due rows locked with FOR UPDATE SKIP LOCKED,
-- leased (or cancelled when their webhook is inactive), returned with what signing needs, oldest
-- first; the lease is committed without waiting for its WAL flush (synchronous_commit off until the
-- end of this transaction; the SET clause does not touch it, so it holds until the commit). PL/pgSQL,
-- not SQL, so that the plan is prepared once per connection rather than at every call.
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
    select d.id, d.next_attempt_at as due_at from webhook_deliveries d
    where d.status = 'pending' and d.next_attempt_at <= now()
    order by d.next_attempt_at, d.id
    limit claim_limit
    for update skip locked
  ), claimed as (
    update webhook_deliveries d set
      status = case when w.is_active then 'pending' else 'cancelled' end,
      next_attempt_at = case when w.is_active then now() + make_interval(secs => lease_secs) else d.next_attempt_at end,
      updated_at = now()
    from due, webhooks w, async
    where d.id = due.id and w.id = d.webhook_id
    returning d.id, d.attempts, d.webhook_id, d.event_id, w.is_active, w.url, w.secret_sealed, due.due_at
  )
  select c.id, c.attempts, c.webhook_id, c.url, c.secret_sealed,
    e.id, e.type, e.data, e.actor_type, e.actor_id, e.created_at
  from claimed c join events e on e.id = c.event_id
  where c.is_active
  order by c.due_at, c.id;
end
$$;
