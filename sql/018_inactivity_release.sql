-- Inactivity release. The job must find due activations cheaply every second, and "due" depends on
-- the key's release_after_seconds: an index cannot look into another table, so each active activation
-- carries a copy of its key's setting (set when the device takes its slot, kept equal by PATCH
-- /v1/keys/:id). The index is over the instant the activation becomes due, in UTC (the immutable form
-- of "last seen + release_after"), and holds only active activations of keys that release at all: a
-- sweep with nothing due is one index probe, whatever the number of idle devices on other keys.
alter table activations add column release_after_seconds integer;

update activations a set release_after_seconds = k.release_after_seconds
  from license_keys k
  where a.key_id = k.id and a.status = 'active' and k.release_after_seconds is not null;

create index activations_release_due on activations (
  (timezone('UTC', coalesce(last_validated_at, activated_at)) + make_interval(secs => release_after_seconds))
) where status = 'active' and release_after_seconds is not null;
