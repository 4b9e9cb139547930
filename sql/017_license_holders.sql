-- License holders (key settings that change after creation, inactivity release, device self-service).
-- - `release_after_seconds`: an active activation idle for this long is released (null = never);
-- - `deactivations_allowed`: how many devices the key's holder may release themselves (null = no cap);
-- - `deactivations_used`: holder releases so far (admin removals and inactivity releases do not count);
-- - `device_name`: the holder's label for a device ("Alice's MacBook"), sent on validate.
alter table license_keys
  add column release_after_seconds integer check (release_after_seconds between 60 and 31536000),
  add column deactivations_allowed integer check (deactivations_allowed between 0 and 10000),
  add column deactivations_used integer not null default 0 check (deactivations_used >= 0);

alter table activations
  add column device_name text check (char_length(device_name) between 1 and 100);
