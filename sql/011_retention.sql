-- Retention (RETENTION_DAYS): the background job deletes events, finished webhook deliveries and
-- attempt logs older than the cutoff, oldest first, in small batches. These indexes let each batch
-- find its rows without scanning the tables, and let "does a delivery still refer to this event?"
-- be answered per event.
create index events_created on events (created_at);
create index webhook_attempts_created on webhook_attempts (created_at);
create index webhook_deliveries_finished on webhook_deliveries (updated_at) where status <> 'pending';
create index webhook_deliveries_event on webhook_deliveries (event_id);
