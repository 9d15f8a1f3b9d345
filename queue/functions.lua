#!lua name=spool_queue
-- The queue's state changes, each one atomic: a Redis Functions library that every producer,
-- worker and spool-queue command loads when it finds none loaded (over another build's only
-- when told to replace it: docs/queue.md, "Upgrading"). queue/README.md explains the model and
-- why each step is safe; docs/queue.md gives the keys and fields for producers in other
-- languages.
--
-- Every function takes KEYS[1] = the queue's prefix, "spool:{QUEUE}", and ARGV[1] = the queue's
-- name; the other keys of the queue are that prefix plus a suffix:
--   :high :normal :low   streams of ready jobs, one per priority, consumer group "workers";
--                        an entry has one field, job = the job's number
--   :job:N               hash: the job (fields below)
--   :delayed             sorted set: job numbers by due time (ms), delayed jobs and retries
--   :dead                sorted set: job numbers by the time they died
--   :key:K               string: the number of the job submitted with key K
--   :seq                 counter: the last job number given
--   :stats               hash: counters, and the gauge queued (running: the pending lists)
--   :config              hash: paused, max (length), served:low, served:normal (aging)
--   :ready               list: wake-up tokens, one per job made ready (at most NUDGES kept);
--                        idle workers that are not listed wait on it with BLPOP, so a ready
--                        job wakes one of them
--   :idle                sorted set: idle workers (consumers) that asked to be given jobs, by
--                        the number of jobs each may still be given (its free room)
--   :idle_until          hash: consumer -> the time (ms) its place in :idle lapses; kept
--                        until its next claim, or forgotten long after the lapse
--   :inbox:CONSUMER      stream: an entry for each job a submission started for that listed
--                        consumer (give: `job N attempt A`, with the job's task, key, limit,
--                        entry, level and payload when the payload is at most INBOX_PAYLOAD
--                        bytes), and `wake 1` for a wake-up token meant for it (nudge); the
--                        worker reads it with XREAD BLOCK from the last entry it has read,
--                        which writes nothing, and its next claim (or reconcile) deletes it
-- and, outside the prefix, spool:queues (set of queue names) and spool:reply:P (list: outcomes
-- for producer P, "K" .. id .. "\n" .. data with K = D done, X dead, C cancelled).
--
-- Job fields: task payload key prio attempts backoff backoff_max limit ttl max_takeovers
-- state attempt failures takeovers outcomes owner entry level due created started finished
-- result error reply inbox (the id of its entry in its owner's inbox, when a submission started
-- it for a listed consumer). The fence of an attempt is (attempt, owner): only the worker that
-- holds the job's current attempt can record its outcome, renew it or hand it back.
--
-- Time is Redis's own (TIME), in ms, so that workers on machines with different clocks agree.

local VERSION = '@VERSION@'
local GROUP = 'workers'
local LEVELS = { 'low', 'normal', 'high' } -- index = priority + 1
local FINAL = { done = true, dead = true, cancelled = true }
local MAX_BATCH = 10000
local NUDGES = 64
-- A job given to a listed worker carries its fields in its inbox entry when its payload is at
-- most this long, so that the worker runs it without reading its hash; a longer payload is not
-- copied, and the worker reads the hash.
local INBOX_PAYLOAD = 4096
-- The most values a call passes to one redis.call from a table: unpack is bounded by Lua's
-- stack, and a batch may hold MAX_BATCH jobs.
local ARGS_PER_CALL = 1000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Numbers go to Redis as integers written out in full (never "1.7e+12").
local function int(n)
  return string.format('%d', n)
end

local function bad(what)
  return redis.error_reply('BADARG spool: ' .. what)
end

-- ARGV[i] as an integer in [lo, hi], or nil.
local function arg_int(args, i, lo, hi)
  local s = args[i]
  if s == nil or not string.match(s, '^%-?%d+$') then
    return nil
  end
  local n = tonumber(s)
  if n < lo or n > hi then
    return nil
  end
  return n
end

local function stream_of(P, level)
  return P .. ':' .. LEVELS[level + 1]
end

-- The stream of jobs a submission started for a listed consumer (assign), and of wake-up
-- tokens meant for it (nudge), read by its worker.
local function inbox_key(P, consumer)
  return P .. ':inbox:' .. consumer
end

local function job_key(P, n)
  return P .. ':job:' .. n
end

-- Puts job n, just started (attempt, owner: consumer) for a listed consumer, in its inbox, and
-- returns the entry's id (kept in the job's `inbox` field). The worker runs a job whose entry
-- carries a payload as the entry says, without reading its hash, so every step that takes the
-- attempt away from the consumer while the entry may be unread deletes it (revoke_given).
local function give(P, consumer, n, attempt, task, payload, key, limit, entry, level)
  local inbox = inbox_key(P, consumer)
  if #payload <= INBOX_PAYLOAD then
    return redis.call('XADD', inbox, '*', 'job', n, 'attempt', attempt, 'task', task, 'key', key,
      'limit', limit, 'entry', entry, 'level', level, 'payload', payload)
  end
  return redis.call('XADD', inbox, '*', 'job', n, 'attempt', attempt)
end

-- Deletes job n's entry `id` from `owner`'s inbox, if it is still there: the attempt it carries
-- no longer holds (a cancel, a takeover). An id left from an inbox deleted since names no
-- entry, or another job's, and deletes nothing.
local function revoke_given(P, n, owner, id)
  if not owner or owner == '' or not id or id == '' then
    return
  end
  local inbox = inbox_key(P, owner)
  local e = redis.call('XRANGE', inbox, id, id)
  if e[1] and e[1][2][1] == 'job' and e[1][2][2] == n then
    redis.call('XDEL', inbox, id)
  end
end

-- Counter changes (stat), the outcomes told to producers (notify) and the stream entries of jobs
-- that ended (drop_later) are gathered during a call and written once at its end
-- (flush_gathered): a call on a batch of N jobs then costs one HINCRBY per counter, one RPUSH
-- and one EXPIRE per reply list, and one XACK and one XDEL per stream, not N of each. A call
-- reads a counter it may have changed only through stat_value, reads no reply list, and reads no
-- stream or pending list after it gathered an entry to drop. Every function that writes is
-- registered through `gathering`, which writes what it gathered when it ends, also when a
-- redis.call raised an error part-way: Redis keeps the writes made before an error, so what
-- goes with them is written too, and the error is then raised again. flush_gathered empties the
-- tally before it writes anything, so even a flush that fails leaves nothing for the next call.
local function nothing_gathered()
  return { stats = {}, stat_keys = {}, notes = {}, note_lists = {}, drops = {}, drop_streams = {} }
end

local gathered = nothing_gathered()

-- Appends `value` to the values gathered under `key` in gathered[part]; gathered[order] lists
-- the keys in the order they first came.
local function gather(part, order, key, value)
  local values = gathered[part][key]
  if not values then
    values = {}
    gathered[part][key] = values
    gathered[order][#gathered[order] + 1] = key
  end
  values[#values + 1] = value
end

local function stat(P, field, by)
  local key = P .. ':stats'
  local counters = gathered.stats[key]
  if not counters then
    counters = { fields = {} }
    gathered.stats[key] = counters
    gathered.stat_keys[#gathered.stat_keys + 1] = key
  end
  if counters[field] == nil then
    counters[field] = 0
    counters.fields[#counters.fields + 1] = field
  end
  counters[field] = counters[field] + by
end

-- A counter's value as this call has left it so far.
local function stat_value(P, field)
  local key = P .. ':stats'
  local counters = gathered.stats[key]
  return (tonumber(redis.call('HGET', key, field) or '0') or 0) +
      (counters and counters[field] or 0)
end

-- Removes an ended job's entry from its stream and from the pending list that holds it, at the
-- end of the call.
local function drop_later(P, level, entry)
  gather('drops', 'drop_streams', stream_of(P, level), entry)
end

-- redis.call(name, key, [extra,] values...), in pieces of at most ARGS_PER_CALL values.
local function call_in_pieces(name, key, extra, values)
  for first = 1, #values, ARGS_PER_CALL do
    local last = math.min(#values, first + ARGS_PER_CALL - 1)
    if extra then
      redis.call(name, key, extra, unpack(values, first, last))
    else
      redis.call(name, key, unpack(values, first, last))
    end
  end
end

local function flush_gathered()
  local g = gathered
  gathered = nothing_gathered()
  for _, key in ipairs(g.stat_keys) do
    local counters = g.stats[key]
    for _, field in ipairs(counters.fields) do
      if counters[field] ~= 0 then
        redis.call('HINCRBY', key, field, counters[field])
      end
    end
  end
  for _, list in ipairs(g.note_lists) do
    call_in_pieces('RPUSH', list, nil, g.notes[list])
    redis.call('EXPIRE', list, 86400)
  end
  for _, s in ipairs(g.drop_streams) do
    call_in_pieces('XACK', s, GROUP, g.drops[s])
    call_in_pieces('XDEL', s, nil, g.drops[s])
  end
end

local function gathering(f)
  return function(keys, args)
    local ok, r = pcall(f, keys, args)
    flush_gathered()
    if not ok then
      error(r, 0)
    end
    return r
  end
end

-- Wakes up to k idle workers, so that a job made ready wakes one worker rather than every idle
-- one. A listed worker reads only its inbox: it gets a token there, `wake 1`, one per listed
-- worker whose listing has not lapsed and whose inbox holds fewer than NUDGES entries, those
-- with the most room first. The other tokens go to :ready, where each unlisted idle worker pops
-- one (BLPOP). At most NUDGES tokens are kept in :ready; a token whose job another worker took
-- meanwhile costs one idle worker one claim, and a claim that finds nothing ready drops them
-- all (claim, below), as it deletes its own inbox.
local function nudge(P, k)
  if k <= 0 then
    return
  end
  k = math.min(k, NUDGES)
  local listed = redis.call('ZRANGE', P .. ':idle', 0, k - 1, 'REV')
  if #listed > 0 then
    local until_ms = redis.call('HMGET', P .. ':idle_until', unpack(listed))
    local now = now_ms()
    for i, consumer in ipairs(listed) do
      local inbox = inbox_key(P, consumer)
      -- Its worker claims (deleting the inbox) after one token or the last job its listing
      -- allowed; an inbox that holds NUDGES entries gets no more tokens, which bounds the
      -- inbox of a worker that died while listed.
      if (tonumber(until_ms[i] or '0') or 0) > now and redis.call('XLEN', inbox) < NUDGES then
        redis.call('XADD', inbox, '*', 'wake', '1')
        k = k - 1
      end
    end
    if k <= 0 then
      return
    end
  end
  local tokens = {}
  for i = 1, k do
    tokens[i] = '1'
  end
  if redis.call('RPUSH', P .. ':ready', unpack(tokens)) > NUDGES then
    redis.call('LTRIM', P .. ':ready', -NUDGES, -1)
  end
end

-- Wakes the idle workers (up to NUDGES): a resume, a new maximum, an earlier due time.
local function wake(P)
  nudge(P, NUDGES)
end

-- The number of a stream entry's time part (ms).
local function entry_ms(id)
  return tonumber(string.match(id, '^(%d+)%-'))
end

-- Tells every producer waiting on the job (its reply lists, the job's `reply`) the outcome.
local function notify(reply, id, kind, data)
  if not reply or reply == '' then
    return
  end
  for list in string.gmatch(reply, '%S+') do
    gather('notes', 'note_lists', list, kind .. id .. '\n' .. data)
  end
end

-- What a caller is told of a job in `state` besides the state: its result once done, its error
-- once dead or cancelled, '' before.
local function final_data(state, result, err)
  if state == 'done' then
    return result or ''
  elseif FINAL[state] then
    return err or ''
  end
  return ''
end

-- Adds a producer's reply list to the job's watchers (its field `reply`), once.
local function add_watcher(jk, watchers, reply)
  watchers = watchers or ''
  if not string.find(' ' .. watchers .. ' ', ' ' .. reply .. ' ', 1, true) then
    redis.call('HSET', jk, 'reply', (watchers == '' and reply) or (watchers .. ' ' .. reply))
  end
end

local function no_job(Q, n)
  return redis.error_reply('NOJOB job ' .. Q .. '/' .. n .. ' does not exist')
end

-- A flat list of names and values (an XINFO reply, a stream entry's fields) as a table; a
-- name given twice keeps its last value.
local function as_table(flat)
  local t = {}
  for i = 1, #flat, 2 do
    t[flat[i]] = flat[i + 1]
  end
  return t
end

-- The head of a call on one job (spool_cancel, _requeue, _delete, _status): ARGV Q, number.
-- Returns P, Q, n, or nothing if one is missing.
local function job_args(keys, args)
  local P, Q, n = keys[1], args[1], args[2]
  if P and Q and n then
    return P, Q, n
  end
end

-- A call on a batch of jobs a worker holds (spool_renew, _finish, _release): ARGV Q, consumer,
-- count, then `width` fields per job. Returns one(P, Q, consumer, args, b) for each job in
-- order, b being the index of the job's first field in args; BADARG naming the call if an
-- argument is missing or the fields do not add up.
local function batch(name, keys, args, width, one)
  local P, Q, consumer = keys[1], args[1], args[2]
  local count = arg_int(args, 3, 0, MAX_BATCH)
  if not P or not consumer or not count or #args ~= 3 + count * width then
    return bad(name .. ' needs QUEUE CONSUMER COUNT and ' .. width .. ' fields per job')
  end
  local out = {}
  for i = 0, count - 1 do
    out[#out + 1] = one(P, Q, consumer, args, 4 + i * width)
  end
  return out
end

-- A final state: the job's result (or error) is kept for its ttl (0: until deleted), and so is
-- its key, so that a second submission with the key still finds it.
local function expire_later(P, jk, ttl, key)
  if ttl > 0 then
    redis.call('EXPIRE', jk, ttl)
    if key and key ~= '' then
      redis.call('EXPIRE', P .. ':key:' .. key, ttl)
    end
  end
end

-- Moves a ready job into its stream (a new entry) and counts it queued.
local function enqueue(P, Q, jk, n, level)
  local entry = redis.call('XADD', stream_of(P, level), '*', 'job', n)
  redis.call('HSET', jk, 'state', 'queued', 'entry', entry, 'owner', '')
  stat(P, 'queued', 1)
  nudge(P, 1)
  return entry
end

-- Removes an entry from the stream and from whoever's pending list holds it.
local function drop_entry(P, level, entry)
  local s = stream_of(P, level)
  redis.call('XACK', s, GROUP, entry)
  redis.call('XDEL', s, entry)
end

-- A stream entry this library did not write (or one that no longer matches its job) becomes a
-- dead record of its own, "QUEUE/bad-ENTRY", with the reason and the entry's fields.
local function bury_malformed(P, Q, level, entry, fields, why, now)
  local n = 'bad-' .. entry
  local jk = job_key(P, n)
  local text = {}
  for i = 1, #fields, 2 do
    text[#text + 1] = tostring(fields[i]) .. '=' .. tostring(fields[i + 1] or '')
  end
  redis.call('HSET', jk, 'task', '', 'payload', table.concat(text, ' '), 'key', '',
    'prio', int(level), 'attempts', '0', 'state', 'dead', 'attempt', '0', 'failures', '0',
    'takeovers', '0', 'outcomes', '1', 'error', 'malformed stream entry ' .. entry .. ' in ' ..
    LEVELS[level + 1] .. ': ' .. why, 'created', int(now), 'finished', int(now), 'ttl', '0')
  redis.call('ZADD', P .. ':dead', now, n)
  stat(P, 'malformed', 1)
  stat(P, 'dead', 1)
  drop_entry(P, level, entry)
end

-- A job that can no longer run: dead, kept (no expiry) and listed, its producers told.
local function bury(P, Q, jk, n, why, now)
  local j = redis.call('HMGET', jk, 'reply', 'outcomes')
  redis.call('HSET', jk, 'state', 'dead', 'error', why, 'finished', int(now), 'entry', '',
    'owner', '', 'outcomes', int((tonumber(j[2]) or 0) + 1))
  redis.call('ZADD', P .. ':dead', now, n)
  stat(P, 'dead', 1)
  notify(j[1], Q .. '/' .. n, 'X', why)
end

-- The delay before retry number `failures` (1 for the first retry): backoff doubling with each
-- failure, at most backoff_max, times a factor in [0.5, 1) drawn by the worker (jitter).
local function retry_delay(backoff, backoff_max, failures, jitter)
  local d = backoff
  for _ = 2, failures do
    d = d * 2
    if d >= backoff_max then
      break
    end
  end
  if d > backoff_max then
    d = backoff_max
  end
  return math.floor(d * (0.5 + jitter / 2))
end

-- Delayed jobs (and retries) whose time has come go to their streams.
local function promote_due(P, Q, now, limit)
  local due = redis.call('ZRANGEBYSCORE', P .. ':delayed', '-inf', now, 'LIMIT', 0, limit)
  for _, n in ipairs(due) do
    redis.call('ZREM', P .. ':delayed', n)
    local jk = job_key(P, n)
    local j = redis.call('HMGET', jk, 'state', 'prio')
    if j[1] == 'delayed' then
      enqueue(P, Q, jk, n, tonumber(j[2]) or 1)
    end
  end
end

-- ---------------------------------------------------------------------------------------------
-- spool_submit: KEYS[1] P; ARGV Q, reply list ('' none), count, then per job 11 fields:
--   task payload key prio delay_ms attempts backoff_ms backoff_max_ms limit_ms ttl_s takeovers
-- Returns per job {id, status, state, data}: status 'new', 'existing' (the job of that key:
-- its state, and its result or error once final) or 'full' (refused: the queue is at its
-- maximum length; id ''). A new job is 'delayed', 'queued', or 'running' when it was started
-- for an idle worker listed by its claim (assign).
-- ---------------------------------------------------------------------------------------------
local FIELDS = 11

-- Defined below, with the claim's helpers.
local assign

local function submit(keys, args)
  local P, Q, reply = keys[1], args[1], args[2]
  local count = arg_int(args, 3, 0, MAX_BATCH)
  if not P or not Q or not reply or not count or #args ~= 3 + count * FIELDS then
    return bad('spool_submit needs QUEUE REPLY COUNT and 11 fields per job')
  end
  local now = now_ms()
  local config = redis.call('HMGET', P .. ':config', 'max', 'paused')
  local max = tonumber(config[1] or '0') or 0
  -- A ready job may go straight to an idle worker (assign) only while no job waits in a
  -- stream: it would otherwise overtake jobs submitted before it.
  local direct = config[2] ~= '1' and
      stat_value(P, 'queued') == 0
  local pending = nil
  -- The earliest due time, read when the first delayed job of the call needs it.
  local earliest, earliest_read = nil, false
  local out = {}
  local ready = 0
  for i = 0, count - 1 do
    local b = 4 + i * FIELDS
    local task, payload, key = args[b], args[b + 1], args[b + 2]
    local prio = arg_int(args, b + 3, 0, 2)
    local delay = arg_int(args, b + 4, 0, 2 ^ 50)
    local attempts = arg_int(args, b + 5, 1, 1000)
    local backoff = arg_int(args, b + 6, 0, 2 ^ 50)
    local backoff_max = arg_int(args, b + 7, 0, 2 ^ 50)
    local limit = arg_int(args, b + 8, 0, 2 ^ 50)
    local ttl = arg_int(args, b + 9, 0, 2 ^ 40)
    local takeovers = arg_int(args, b + 10, 0, 1000)
    if task == '' or not prio or not delay or not attempts or not backoff or not backoff_max
        or not limit or not ttl or not takeovers then
      return bad('job ' .. (i + 1) .. ': a field is missing or out of range')
    end
    local existing = nil
    if key ~= '' then
      existing = redis.call('GET', P .. ':key:' .. key)
      if existing and redis.call('EXISTS', job_key(P, existing)) == 0 then
        existing = nil -- its job expired: the key is free again
      end
    end
    if existing then
      local jk = job_key(P, existing)
      local j = redis.call('HMGET', jk, 'state', 'result', 'error', 'reply')
      if not FINAL[j[1]] and reply ~= '' then
        add_watcher(jk, j[4], reply)
      end
      out[#out + 1] = { Q .. '/' .. existing, 'existing', j[1], final_data(j[1], j[2], j[3]) }
    else
      if max > 0 and pending == nil then
        pending = stat_value(P, 'queued') + redis.call('ZCARD', P .. ':delayed')
      end
      if max > 0 and pending >= max then
        out[#out + 1] = { '', 'full', '', '' }
      else
        local n = int(redis.call('INCR', P .. ':seq'))
        local jk = job_key(P, n)
        local state, entry, due, owner = 'queued', '', '', nil
        if delay > 0 then
          state = 'delayed'
          due = int(now + delay)
          if not earliest_read then
            local head = redis.call('ZRANGE', P .. ':delayed', 0, 0, 'WITHSCORES')
            earliest, earliest_read = head[2] and tonumber(head[2]) or nil, true
          end
          redis.call('ZADD', P .. ':delayed', due, n)
          if earliest == nil or now + delay < earliest then
            earliest = now + delay
            wake(P) -- idle workers sleep until the earliest due time they know of
          end
        else
          entry = redis.call('XADD', stream_of(P, prio), '*', 'job', n)
          -- Started at once for an idle worker (its first attempt, as start() would make it),
          -- or queued.
          owner = direct and assign(P, Q, prio, entry, now)
          if owner then
            state = 'running'
          else
            direct = false
            stat(P, 'queued', 1)
            ready = ready + 1
          end
        end
        local fields = { 'task', task, 'payload', payload, 'key', key, 'prio', int(prio),
          'attempts', int(attempts), 'backoff', int(backoff), 'backoff_max', int(backoff_max),
          'limit', int(limit), 'ttl', int(ttl), 'max_takeovers', int(takeovers),
          'attempt', owner and '1' or '0', 'failures', '0', 'takeovers', '0', 'outcomes', '0',
          'created', int(now), 'reply', reply, 'owner', owner or '', 'entry', entry,
          'level', int(prio), 'state', state, 'due', due }
        if owner then
          fields[#fields + 1] = 'started'
          fields[#fields + 1] = int(now)
          fields[#fields + 1] = 'inbox'
          fields[#fields + 1] = give(P, owner, n, '1', task, payload, key, int(limit), entry,
            int(prio))
        end
        redis.call('HSET', jk, unpack(fields))
        if key ~= '' then
          redis.call('SET', P .. ':key:' .. key, n)
        end
        if pending and state ~= 'running' then
          pending = pending + 1
        end
        out[#out + 1] = { Q .. '/' .. n, 'new', state, '' }
      end
    end
  end
  nudge(P, ready)
  if count > 0 then
    redis.call('SADD', 'spool:queues', Q)
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- spool_claim: KEYS[1] P; ARGV Q, consumer, room, lease_ms, takeovers (1: look for expired
-- leases too), aging_ms, and optionally listed_ms and inbox_read (the id of the last inbox
-- entry the worker has read; default 0-0, none). Starts up to `room` jobs for the consumer:
-- each gets the next attempt number and the consumer as its owner, in the same step that
-- delivers it (so there is never a delivered job that no attempt holds). The jobs in the
-- consumer's inbox after inbox_read (given to it while it was listed idle) come first, the
-- inbox is deleted, and the consumer is no longer listed. Returns {jobs, next_due, paused,
-- idle, listed}: jobs as {id, attempt, task, payload, key, limit_ms, entry, level, taken_over
-- (1 if from an expired lease)}; next_due = ms until the earliest delayed job (-1: none);
-- idle = 1 when nothing more can start now (fewer than `room` jobs were found and every
-- stream was read to its end, or the queue is paused): the wake-up tokens in :ready are then
-- dropped, stale, and the caller waits for the next job on its inbox (XREAD) if listed, on
-- :ready (BLPOP) if not; idle = 0: the caller claims again. listed: when idle and listed_ms > 0
-- (and the queue is not paused), the consumer is listed idle for listed_ms with the room it
-- has left, and listed is that room: as many jobs as that may be started for it by
-- submissions and put in its inbox (0: not listed).
-- ---------------------------------------------------------------------------------------------

-- XREADGROUP or XAUTOCLAIM on a stream, creating the stream and its group on first use.
local function group_call(s, ...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    if not string.find(r.err, 'NOGROUP', 1, true) then
      return redis.error_reply(r.err)
    end
    redis.pcall('XGROUP', 'CREATE', s, GROUP, '0', 'MKSTREAM')
    r = redis.call(...)
  end
  return r
end

-- Starts the job of one delivered entry, or deals with an entry that cannot run (a leftover
-- of a finished or cancelled job, a malformed one, a job out of takeovers). Returns the job's
-- description, or nil.
local function start(P, Q, consumer, level, entry, fields, via_takeover, now)
  local n = as_table(fields)['job']
  if not n or n == '' or string.find(n, '[^%w%-]') then
    bury_malformed(P, Q, level, entry, fields, 'no job field', now)
    return nil
  end
  local jk = job_key(P, n)
  local j = redis.call('HMGET', jk, 'state', 'entry', 'attempt', 'task', 'payload', 'key',
    'limit', 'takeovers', 'max_takeovers', 'owner', 'inbox')
  local state = j[1]
  if not state then
    bury_malformed(P, Q, level, entry, fields, 'job ' .. Q .. '/' .. n .. ' does not exist', now)
    return nil
  end
  if j[2] ~= entry then
    if FINAL[state] then
      drop_entry(P, level, entry) -- a leftover of a job that ended while this entry waited
    else
      bury_malformed(P, Q, level, entry, fields,
        'job ' .. Q .. '/' .. n .. ' is in another entry (' .. tostring(j[2]) .. ')', now)
    end
    return nil
  end
  if state == 'queued' then
    stat(P, 'queued', -1)
  elseif state == 'running' and via_takeover then
    revoke_given(P, n, j[10], j[11])
    local takeovers = (tonumber(j[8]) or 0) + 1
    redis.call('HSET', jk, 'takeovers', int(takeovers))
    stat(P, 'takeovers', 1)
    if takeovers > (tonumber(j[9]) or 0) then
      drop_entry(P, level, entry)
      bury(P, Q, jk, n, 'lost its lease ' .. takeovers .. ' times (the last holder was ' ..
        tostring(j[10]) .. ')', now)
      return nil
    end
  else
    drop_entry(P, level, entry)
    return nil
  end
  local attempt = (tonumber(j[3]) or 0) + 1
  redis.call('HSET', jk, 'state', 'running', 'attempt', int(attempt), 'owner', consumer,
    'started', int(now))
  return { Q .. '/' .. n, attempt, j[4] or '', j[5] or '', j[6] or '', tonumber(j[7]) or 0,
    entry, level, via_takeover and 1 or 0 }
end

-- Takes the consumer off the idle workers and deletes its inbox. Returns the inbox's entries
-- after `read` (the last one its worker has read; nil: none returned) as {number, attempt}
-- pairs, wake-up tokens left out; an entry with other fields gives {nil, nil}.
local function unlist_idle(P, consumer, read)
  local inbox = inbox_key(P, consumer)
  local items = {}
  if read then
    local entries = read == '0-0' and redis.call('XRANGE', inbox, '-', '+') or
        redis.call('XRANGE', inbox, '(' .. read, '+')
    for _, e in ipairs(entries) do
      local f = as_table(e[2])
      if f['wake'] == nil then
        items[#items + 1] = { f['job'], f['attempt'] }
      end
    end
  end
  redis.call('DEL', inbox)
  redis.call('ZREM', P .. ':idle', consumer)
  redis.call('HDEL', P .. ':idle_until', consumer)
  return items
end

-- Delivers the entry just added to `level` (a new job's, whose hash is not written yet) to an
-- idle worker, if one is listed: the caller then starts the job for it and puts it in that
-- worker's inbox, so that the job's start needs no claim of its own. The worker is the one
-- with the most room left; one whose place lapsed (a worker that died, or stopped claiming)
-- leaves :idle, and a listing used up leaves it too. Called only while no job waits in a
-- stream, so the entries read before this one, if any, are leftovers that start() drops or
-- buries (or, were one a job, starts for the worker). Returns the worker's consumer name, or
-- nil if the entry was not delivered.
assign = function(P, Q, level, entry, now)
  local idle, idle_until = P .. ':idle', P .. ':idle_until'
  for _ = 1, 4 do
    local top = redis.call('ZRANGE', idle, -1, -1, 'WITHSCORES')
    if not top[1] then
      return nil
    end
    local consumer, slots = top[1], tonumber(top[2])
    local until_ms = tonumber(redis.call('HGET', idle_until, consumer) or '0') or 0
    if slots < 1 or until_ms <= now then
      -- Its lapse time stays, for the claims that forget long-lapsed listings (claim).
      redis.call('ZREM', idle, consumer)
    else
      local s = stream_of(P, level)
      local delivered = false
      for _ = 1, 1000 do
        local r = group_call(s, 'XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', 1, 'STREAMS',
          s, '>')
        if type(r) == 'table' and r.err then
          return nil
        end
        local e = r and r[1][2][1]
        if not e then
          break
        end
        if e[1] == entry then
          delivered = true
          slots = slots - 1
          break
        end
        local job = start(P, Q, consumer, level, e[1], e[2] or {}, false, now)
        if job then
          local n = string.sub(job[1], #Q + 2)
          redis.call('HSET', job_key(P, n), 'inbox', give(P, consumer, n, int(job[2]), job[3],
            job[4], job[5], int(job[6]), job[7], int(job[8])))
          slots = slots - 1
          if slots < 1 then
            break
          end
        end
      end
      if slots < 1 then
        redis.call('ZREM', idle, consumer)
      else
        redis.call('ZADD', idle, slots, consumer)
      end
      return delivered and consumer or nil
    end
  end
  return nil
end

local function claim(keys, args)
  local P, Q, consumer = keys[1], args[1], args[2]
  local room = arg_int(args, 3, 0, MAX_BATCH)
  local lease = arg_int(args, 4, 1, 2 ^ 40)
  local takeovers = arg_int(args, 5, 0, 1)
  local aging = arg_int(args, 6, 0, 2 ^ 40)
  -- Absent, 0; present and malformed, nil (refused below), not 0.
  local listed_ms = 0
  if args[7] then
    listed_ms = arg_int(args, 7, 0, 2 ^ 40)
  end
  local read = args[8] or '0-0'
  if not P or not Q or not consumer or consumer == '' or not room or not lease or not takeovers
      or not aging or not listed_ms or not string.match(read, '^%d+%-%d+$') or #args > 8 then
    return bad('spool_claim needs QUEUE CONSUMER ROOM LEASE_MS TAKEOVERS AGING_MS ' ..
      '[LISTED_MS [INBOX_READ]]')
  end
  local now = now_ms()
  -- Jobs given to this consumer while it was listed idle and not yet read from its inbox come
  -- first; one that no longer holds (cancelled, taken over) is left out.
  local jobs = {}
  for _, item in ipairs(unlist_idle(P, consumer, read)) do
    local n, attempt = item[1], item[2]
    if n and not (string.match(n, '^%d+$') and attempt and string.match(attempt, '^%d+$')) then
      n = nil
    end
    local j = n and redis.call('HMGET', job_key(P, n), 'state', 'attempt', 'owner', 'task',
      'payload', 'key', 'limit', 'entry', 'level')
    if j and j[1] == 'running' and j[2] == attempt and j[3] == consumer then
      jobs[#jobs + 1] = { Q .. '/' .. n, tonumber(attempt), j[4] or '', j[5] or '', j[6] or '',
        tonumber(j[7]) or 0, j[8] or '', tonumber(j[9]) or 1, 0 }
    end
  end
  -- The delayed set's head says whether anything is due (and, unless promoted, next_due); the
  -- config hash, whether the queue is paused and when each lower level was served last.
  local head = redis.call('ZRANGE', P .. ':delayed', 0, 0, 'WITHSCORES')
  local promoted = head[2] ~= nil and tonumber(head[2]) <= now
  if promoted then
    promote_due(P, Q, now, 1000)
  end
  local config = redis.call('HMGET', P .. ':config', 'paused', 'served:low', 'served:normal')
  local paused = config[1] == '1'
  local drained = true
  local function take(level, entries, via_takeover)
    for _, e in ipairs(entries) do
      local job = start(P, Q, consumer, level, e[1], e[2] or {}, via_takeover, now)
      if job then
        jobs[#jobs + 1] = job
      end
    end
  end
  if not paused and room > 0 then
    if takeovers == 1 then
      -- Each XAUTOCLAIM looks at 10 pending entries per job asked for: go on from its cursor
      -- until the pending list has been seen whole or the room is full.
      for level = 2, 0, -1 do
        local s = stream_of(P, level)
        local cursor = '0-0'
        repeat
          local left = room - #jobs
          if left <= 0 then
            break
          end
          local r = group_call(s, 'XAUTOCLAIM', s, GROUP, consumer, lease, cursor, 'COUNT', left)
          if r.err then
            return r
          end
          take(level, r[2], true)
          cursor = r[1]
        until cursor == '0-0'
      end
      -- Consumers that hold nothing and have not been heard of for a while (workers that
      -- died; a live one claims every check interval) leave the group. Harmless if wrong: a
      -- consumer with nothing pending comes back with its next claim.
      local forget = math.max(60000, 5 * lease)
      for level = 0, 2 do
        local s = stream_of(P, level)
        local consumers = redis.pcall('XINFO', 'CONSUMERS', s, GROUP)
        if type(consumers) == 'table' and not consumers.err then
          for _, c in ipairs(consumers) do
            local ci = as_table(c)
            if ci['pending'] == 0 and ci['idle'] > forget and ci['name'] ~= consumer then
              redis.call('XGROUP', 'DELCONSUMER', s, GROUP, ci['name'])
            end
          end
        end
      end
      -- Listings that lapsed leave :idle; those lapsed that long ago (their worker died or
      -- was cut off: a live one claims every check interval) are forgotten with their inbox,
      -- whose jobs are pending under that consumer and taken over when their leases run out.
      local lapsed = redis.call('HGETALL', P .. ':idle_until')
      for i = 1, #lapsed, 2 do
        local c, until_ms = lapsed[i], tonumber(lapsed[i + 1]) or 0
        if until_ms <= now then
          redis.call('ZREM', P .. ':idle', c)
        end
        if until_ms + forget <= now then
          redis.call('HDEL', P .. ':idle_until', c)
          redis.call('DEL', inbox_key(P, c))
        end
      end
    end
    -- Aging (0: strict levels): a level below high that has waited `aging` since it was last
    -- served (or last seen empty) gets one job first, so that a steady flow of higher work
    -- starves nothing.
    for level = 0, 1 do
      if aging > 0 and room - #jobs > 0 then
        local field = 'served:' .. LEVELS[level + 1]
        local served = tonumber(config[level + 2] or '0') or 0
        if now - served >= aging then
          local s = stream_of(P, level)
          local r = group_call(s, 'XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', 1, 'STREAMS',
            s, '>')
          if type(r) == 'table' and r.err then
            return r
          end
          if r then
            take(level, r[1][2], false)
          end
          redis.call('HSET', P .. ':config', field, int(now))
        end
      end
    end
    -- Each level in turn until the room is full. A level is read until it has no more new
    -- entries (entries that start no job, leftovers and malformed ones, do not fill the room),
    -- so that fewer jobs than room means every stream is drained.
    -- At most `budget` entries are read in one call, so that a long run of leftovers does not
    -- hold Redis up; the caller claims again at once when it ran out (drained = false).
    -- A read that returns fewer entries than it asked for has seen the level's end: no other
    -- client runs while this function does, so nothing new can have been added meanwhile.
    local budget = 1000
    for level = 2, 0, -1 do
      local s = stream_of(P, level)
      local served = false
      while room - #jobs > 0 do
        if budget <= 0 then
          drained = false
          break
        end
        local asked = room - #jobs
        local r = group_call(s, 'XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', asked,
          'STREAMS', s, '>')
        if type(r) == 'table' and r.err then
          return r
        end
        if not r then
          break
        end
        local entries = r[1][2]
        budget = budget - #entries
        take(level, entries, false)
        served = true
        if #entries < asked then
          break
        end
      end
      if served and level < 2 then
        redis.call('HSET', P .. ':config', 'served:' .. LEVELS[level + 1], int(now))
      end
    end
  end
  local next_due = -1
  if promoted then
    head = redis.call('ZRANGE', P .. ':delayed', 0, 0, 'WITHSCORES')
  end
  if head[2] then
    next_due = math.max(0, tonumber(head[2]) - now)
  end
  local idle = 0
  local listed = 0
  if (#jobs < room or paused) and drained then
    -- No entry is left unread (or none may start before a resume, which wakes): every token
    -- is stale. A job made ready from now on pushes its own.
    redis.call('DEL', P .. ':ready')
    idle = 1
    -- Asked to be listed: submissions start jobs for this consumer directly, as many as the
    -- room it has left, until listed_ms passes or its next claim.
    if listed_ms > 0 and not paused then
      listed = room - #jobs
      redis.call('ZADD', P .. ':idle', listed, consumer)
      redis.call('HSET', P .. ':idle_until', consumer, int(now + listed_ms))
    end
  end
  return { jobs, next_due, paused and 1 or 0, idle, listed }
end

-- ---------------------------------------------------------------------------------------------
-- spool_renew: KEYS[1] P; ARGV Q, consumer, count, then per job: number attempt entry level.
-- Renews the lease of each attempt the consumer still holds (the idle time of its pending
-- entry goes back to 0). Returns per job 1 (held), 0 (lost: another attempt or a final state)
-- or 2 (cancelled).
-- ---------------------------------------------------------------------------------------------
local function renew_one(P, _, consumer, args, b)
  local n, attempt, entry, level = args[b], args[b + 1], args[b + 2], arg_int(args, b + 3, 0, 2)
  local j = redis.call('HMGET', job_key(P, n), 'state', 'attempt', 'owner')
  local code = 0
  if j[1] == 'running' and j[2] == attempt and j[3] == consumer and level then
    local r = redis.call('XCLAIM', stream_of(P, level), GROUP, consumer, 0, entry, 'JUSTID')
    if #r == 1 then
      code = 1
    end
  elseif j[1] == 'cancelled' then
    code = 2
  end
  return code
end

local function renew(keys, args)
  return batch('spool_renew', keys, args, 4, renew_one)
end

-- ---------------------------------------------------------------------------------------------
-- spool_finish: KEYS[1] P; ARGV Q, consumer, count, then per job: number attempt outcome data
-- jitter, outcome 'ok' (data = the result) or 'error' (data = the error), jitter in [0, 1) as
-- a decimal. Records the outcome of an attempt, only if the consumer holds that attempt now
-- (the fence). Returns per job: 'done', 'retry' (failed; runs again after its backoff), 'dead'
-- (failed with no attempts left), 'stale' (the attempt is no longer held: nothing recorded),
-- 'cancelled' (the job was cancelled meanwhile: nothing recorded) or 'dup' (this very outcome
-- was recorded already: a repeated call after a lost reply).
-- ---------------------------------------------------------------------------------------------
local function finish_one(P, Q, consumer, args, b, now)
  local n, attempt, outcome, data = args[b], args[b + 1], args[b + 2], args[b + 3]
  local jitter = tonumber(args[b + 4]) or 0
  local jk = job_key(P, n)
  local j = redis.call('HMGET', jk, 'state', 'attempt', 'owner', 'entry', 'level', 'failures',
    'attempts', 'backoff', 'backoff_max', 'ttl', 'key', 'outcome_attempt', 'outcome_owner',
    'reply', 'outcomes')
  local code
  if j[1] == 'running' and j[2] == attempt and j[3] == consumer then
    drop_later(P, tonumber(j[5]) or 1, j[4])
    local ttl = tonumber(j[10]) or 0
    if outcome == 'ok' then
      redis.call('HSET', jk, 'state', 'done', 'result', data, 'finished', int(now), 'entry', '',
        'outcome_attempt', attempt, 'outcome_owner', consumer,
        'outcomes', int((tonumber(j[15]) or 0) + 1))
      stat(P, 'done', 1)
      notify(j[14], Q .. '/' .. n, 'D', data)
      expire_later(P, jk, ttl, j[11])
      code = 'done'
    else
      local failures = (tonumber(j[6]) or 0) + 1
      stat(P, 'failed', 1)
      redis.call('HSET', jk, 'failures', int(failures), 'error', data)
      if failures < (tonumber(j[7]) or 1) then
        local due = now + retry_delay(tonumber(j[8]) or 0, tonumber(j[9]) or 0, failures, jitter)
        redis.call('HSET', jk, 'state', 'delayed', 'due', int(due), 'entry', '', 'owner', '')
        redis.call('ZADD', P .. ':delayed', due, n)
        local head = redis.call('ZRANGE', P .. ':delayed', 0, 0)
        if head[1] == n then
          wake(P)
        end
        stat(P, 'retried', 1)
        code = 'retry'
      else
        redis.call('HSET', jk, 'outcome_attempt', attempt, 'outcome_owner', consumer)
        bury(P, Q, jk, n, data, now)
        code = 'dead'
      end
    end
  elseif (j[1] == 'done' or j[1] == 'dead') and j[12] == attempt and j[13] == consumer then
    code = 'dup'
  elseif j[1] == 'cancelled' then
    code = 'cancelled'
  else
    code = 'stale'
  end
  return code
end

local function finish(keys, args)
  local now = now_ms()
  return batch('spool_finish', keys, args, 5, function(P, Q, consumer, _, b)
    return finish_one(P, Q, consumer, args, b, now)
  end)
end

-- ---------------------------------------------------------------------------------------------
-- spool_release: KEYS[1] P; ARGV Q, consumer, count, then per job: number attempt. Hands back
-- attempts the consumer holds (a worker stopping): each job is ready again at once, in a new
-- entry at the end of its stream, without counting a failure. Returns per job 1 or 0 (not
-- held: nothing done).
-- ---------------------------------------------------------------------------------------------
local function release_one(P, Q, consumer, n, attempt)
  local jk = job_key(P, n)
  local j = redis.call('HMGET', jk, 'state', 'attempt', 'owner', 'entry', 'level')
  if j[1] ~= 'running' or (attempt and j[2] ~= attempt) or j[3] ~= consumer then
    return 0
  end
  local level = tonumber(j[5]) or 1
  drop_entry(P, level, j[4])
  stat(P, 'handed_back', 1)
  enqueue(P, Q, jk, n, level)
  return 1
end

local function release(keys, args)
  return batch('spool_release', keys, args, 2, function(P, Q, consumer, _, b)
    return release_one(P, Q, consumer, args[b], args[b + 1])
  end)
end

-- ---------------------------------------------------------------------------------------------
-- spool_reconcile: KEYS[1] P; ARGV Q, consumer, leaving (1: the consumer is going away), then
-- the numbers of the jobs the consumer knows it holds. Hands back every other job that Redis
-- says the consumer holds (a claim whose reply was lost), drops pending entries that no job
-- refers to, and, when leaving with nothing left pending, deletes the consumer from the group.
-- Returns the number of jobs handed back.
-- ---------------------------------------------------------------------------------------------
local function reconcile(keys, args)
  local P, Q, consumer = keys[1], args[1], args[2]
  local leaving = arg_int(args, 3, 0, 1)
  if not P or not consumer or not leaving then
    return bad('spool_reconcile needs QUEUE CONSUMER LEAVING [JOB...]')
  end
  local known = {}
  for i = 4, #args do
    known[args[i]] = true
  end
  -- The inbox's jobs are pending under the consumer and, unknown to it, handed back below.
  unlist_idle(P, consumer)
  local released = 0
  local left = 0
  for level = 0, 2 do
    local s = stream_of(P, level)
    local pending = redis.pcall('XPENDING', s, GROUP, '-', '+', 1000, consumer)
    if type(pending) == 'table' and not pending.err then
      for _, p in ipairs(pending) do
        local entry = p[1]
        local e = redis.call('XRANGE', s, entry, entry)
        local n = e[1] and as_table(e[1][2])['job']
        if n and known[n] then
          left = left + 1
        elseif n and redis.call('HGET', job_key(P, n), 'entry') == entry then
          released = released + release_one(P, Q, consumer, n, nil)
        else
          redis.call('XACK', s, GROUP, entry)
        end
      end
    end
  end
  if leaving == 1 and left == 0 then
    for level = 0, 2 do
      redis.pcall('XGROUP', 'DELCONSUMER', stream_of(P, level), GROUP, consumer)
    end
  end
  return released
end

-- ---------------------------------------------------------------------------------------------
-- spool_cancel: KEYS[1] P; ARGV Q, number. A queued or delayed job never starts; a running one
-- is no longer held by its attempt (its worker hears it at its next renewal and fires the
-- handler's token) and is not retried. Records the outcome 'cancelled'. Returns the state the
-- job was in; errors NOJOB, WRONGSTATE (already final).
-- ---------------------------------------------------------------------------------------------
local function cancel(keys, args)
  local P, Q, n = job_args(keys, args)
  if not P then
    return bad('spool_cancel needs QUEUE NUMBER')
  end
  local jk = job_key(P, n)
  local j = redis.call('HMGET', jk, 'state', 'entry', 'level', 'ttl', 'key', 'reply', 'outcomes',
    'owner', 'inbox')
  local state = j[1]
  if not state then
    return no_job(Q, n)
  end
  if FINAL[state] then
    return redis.error_reply('WRONGSTATE job ' .. Q .. '/' .. n .. ' is ' .. state .. ' already')
  end
  local now = now_ms()
  local level = tonumber(j[3]) or 1
  if state == 'queued' then
    drop_entry(P, level, j[2])
    stat(P, 'queued', -1)
  elseif state == 'delayed' then
    redis.call('ZREM', P .. ':delayed', n)
  elseif state == 'running' then
    drop_entry(P, level, j[2])
    revoke_given(P, n, j[8], j[9])
  end
  redis.call('HSET', jk, 'state', 'cancelled', 'finished', int(now), 'entry', '',
    'outcomes', int((tonumber(j[7]) or 0) + 1))
  stat(P, 'cancelled', 1)
  notify(j[6], Q .. '/' .. n, 'C', 'cancelled')
  expire_later(P, jk, tonumber(j[4]) or 0, j[5])
  return state
end

-- ---------------------------------------------------------------------------------------------
-- spool_requeue / spool_delete: KEYS[1] P; ARGV Q, number. A dead job runs again (its failures
-- and takeovers start from 0; its attempt numbers go on), or is deleted. Errors NOJOB,
-- WRONGSTATE (the job is not dead).
-- ---------------------------------------------------------------------------------------------
local function dead_job(P, Q, n)
  local jk = job_key(P, n)
  local j = redis.call('HMGET', jk, 'state', 'prio', 'key')
  if not j[1] then
    return nil, no_job(Q, n)
  end
  if j[1] ~= 'dead' then
    return nil, redis.error_reply('WRONGSTATE job ' .. Q .. '/' .. n .. ' is ' .. j[1] ..
      ', not dead')
  end
  return j, nil
end

local function requeue(keys, args)
  local P, Q, n = job_args(keys, args)
  if not P then
    return bad('spool_requeue needs QUEUE NUMBER')
  end
  local j, err = dead_job(P, Q, n)
  if not j then
    return err
  end
  if string.sub(n, 1, 4) == 'bad-' then
    return redis.error_reply('WRONGSTATE ' .. Q .. '/' .. n .. ' is a malformed entry: it has ' ..
      'no job to run (delete it)')
  end
  local jk = job_key(P, n)
  redis.call('ZREM', P .. ':dead', n)
  redis.call('HSET', jk, 'failures', '0', 'takeovers', '0', 'error', '', 'finished', '')
  enqueue(P, Q, jk, n, tonumber(j[2]) or 1)
  stat(P, 'requeued', 1)
  wake(P)
  return 'queued'
end

local function delete(keys, args)
  local P, Q, n = job_args(keys, args)
  if not P then
    return bad('spool_delete needs QUEUE NUMBER')
  end
  local j, err = dead_job(P, Q, n)
  if not j then
    return err
  end
  redis.call('ZREM', P .. ':dead', n)
  if j[3] and j[3] ~= '' and redis.call('GET', P .. ':key:' .. j[3]) == n then
    redis.call('DEL', P .. ':key:' .. j[3])
  end
  redis.call('DEL', job_key(P, n))
  return 'deleted'
end

-- ---------------------------------------------------------------------------------------------
-- spool_watch: KEYS[1] P; ARGV Q, number, reply list. Adds a producer's reply list to the job's
-- watchers, unless it is final. Returns {state, data}; error NOJOB.
-- ---------------------------------------------------------------------------------------------
local function watch(keys, args)
  local P, Q, n, reply = keys[1], args[1], args[2], args[3]
  if not P or not Q or not n or not reply or reply == '' then
    return bad('spool_watch needs QUEUE NUMBER REPLY')
  end
  local jk = job_key(P, n)
  local j = redis.call('HMGET', jk, 'state', 'result', 'error', 'reply')
  if not j[1] then
    return no_job(Q, n)
  end
  if FINAL[j[1]] then
    return { j[1], final_data(j[1], j[2], j[3]) }
  end
  add_watcher(jk, j[4], reply)
  return { j[1], '' }
end

-- ---------------------------------------------------------------------------------------------
-- spool_peek (read-only): KEYS[1] P; ARGV Q, numbers... Returns per job {state, data} ('' for
-- a job that does not exist), data being the result or error once final.
-- ---------------------------------------------------------------------------------------------
local function peek(keys, args)
  local P = keys[1]
  local out = {}
  for i = 2, #args do
    local j = redis.call('HMGET', job_key(P, args[i]), 'state', 'result', 'error')
    local state = j[1] or ''
    out[#out + 1] = { state, final_data(state, j[2], j[3]) }
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- spool_status (read-only): KEYS[1] P; ARGV Q, number. The job's fields as a flat list of
-- names and values; error NOJOB.
-- ---------------------------------------------------------------------------------------------
local function status(keys, args)
  local P, Q, n = job_args(keys, args)
  if not P then
    return bad('spool_status needs QUEUE NUMBER')
  end
  local h = redis.call('HGETALL', job_key(P, n))
  if #h == 0 then
    return no_job(Q, n)
  end
  return h
end

-- ---------------------------------------------------------------------------------------------
-- spool_stats (read-only): KEYS[1] P; ARGV Q. A flat list of names and values: the counters
-- and gauges of :stats, delayed, dead, paused, max, lag_ms (how long the oldest ready job has
-- waited, 0 if none), then 'workers' and for each consumer of the group its name, pending
-- count and idle ms.
-- ---------------------------------------------------------------------------------------------
local function stats(keys, args)
  local P = keys[1]
  if not P then
    return bad('spool_stats needs QUEUE')
  end
  local now = now_ms()
  local out = redis.call('HGETALL', P .. ':stats')
  local cfg = redis.call('HMGET', P .. ':config', 'paused', 'max')
  local lag = 0
  local running = 0 -- a running job's entry is pending, and a pending entry is a running job
  local workers = {}
  for level = 0, 2 do
    local s = stream_of(P, level)
    local groups = redis.pcall('XINFO', 'GROUPS', s)
    if type(groups) ~= 'table' or groups.err or #groups == 0 then
      -- No group yet (no worker has looked): every entry waits.
      local first = redis.call('XRANGE', s, '-', '+', 'COUNT', 1)
      if first[1] then
        lag = math.max(lag, now - entry_ms(first[1][1]))
      end
    else
      for _, g in ipairs(groups) do
        local info = as_table(g)
        if info['name'] == GROUP then
          running = running + info['pending']
          local next_entry = redis.call('XRANGE', s, '(' .. info['last-delivered-id'], '+',
            'COUNT', 1)
          if next_entry[1] then
            lag = math.max(lag, now - entry_ms(next_entry[1][1]))
          end
          local consumers = redis.call('XINFO', 'CONSUMERS', s, GROUP)
          for _, c in ipairs(consumers) do
            local ci = as_table(c)
            local w = workers[ci['name']]
            if not w then
              w = { 0, ci['idle'] }
              workers[ci['name']] = w
            end
            w[1] = w[1] + ci['pending']
            w[2] = math.min(w[2], ci['idle'])
          end
        end
      end
    end
  end
  out[#out + 1] = 'submitted'
  out[#out + 1] = tonumber(redis.call('GET', P .. ':seq') or '0')
  out[#out + 1] = 'running'
  out[#out + 1] = running
  out[#out + 1] = 'delayed'
  out[#out + 1] = redis.call('ZCARD', P .. ':delayed')
  out[#out + 1] = 'dead_now'
  out[#out + 1] = redis.call('ZCARD', P .. ':dead')
  out[#out + 1] = 'paused'
  out[#out + 1] = (cfg[1] == '1') and 1 or 0
  out[#out + 1] = 'max'
  out[#out + 1] = tonumber(cfg[2] or '0') or 0
  out[#out + 1] = 'lag_ms'
  out[#out + 1] = lag
  local list = {}
  for name, w in pairs(workers) do
    list[#list + 1] = { name, w[1], w[2] }
  end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  out[#out + 1] = 'workers'
  out[#out + 1] = list
  return out
end

-- ---------------------------------------------------------------------------------------------
-- spool_dead (read-only): KEYS[1] P; ARGV Q, limit. The oldest dead jobs first: {id, died ms,
-- task, attempts run, error}.
-- ---------------------------------------------------------------------------------------------
local function dead(keys, args)
  local P, Q = keys[1], args[1]
  local limit = arg_int(args, 2, 1, 100000)
  if not P or not Q or not limit then
    return bad('spool_dead needs QUEUE LIMIT')
  end
  local ids = redis.call('ZRANGE', P .. ':dead', 0, limit - 1, 'WITHSCORES')
  local out = {}
  for i = 1, #ids, 2 do
    local j = redis.call('HMGET', job_key(P, ids[i]), 'task', 'attempt', 'error')
    out[#out + 1] = { Q .. '/' .. ids[i], tonumber(ids[i + 1]), j[1] or '', tonumber(j[2]) or 0,
      j[3] or '' }
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- spool_control: KEYS[1] P; ARGV Q, what ('pause', 'resume', 'max'), value (for max: the
-- maximum length, 0 for none).
-- ---------------------------------------------------------------------------------------------
local function control(keys, args)
  local P, Q, what = keys[1], args[1], args[2]
  if not P or not Q then
    return bad('spool_control needs QUEUE WHAT [VALUE]')
  end
  if what == 'pause' then
    redis.call('HSET', P .. ':config', 'paused', '1')
  elseif what == 'resume' then
    redis.call('HDEL', P .. ':config', 'paused')
    wake(P)
  elseif what == 'max' then
    local max = arg_int(args, 3, 0, 2 ^ 50)
    if not max then
      return bad('the maximum length must be a number >= 0')
    end
    redis.call('HSET', P .. ':config', 'max', int(max))
    wake(P)
  else
    return bad('spool_control: unknown operation ' .. tostring(what))
  end
  redis.call('SADD', 'spool:queues', Q)
  return 'ok'
end

local function queues()
  local q = redis.call('SMEMBERS', 'spool:queues')
  table.sort(q)
  return q
end

local function version()
  return VERSION
end

redis.register_function('spool_submit', gathering(submit))
redis.register_function('spool_claim', gathering(claim))
redis.register_function('spool_renew', gathering(renew))
redis.register_function('spool_finish', gathering(finish))
redis.register_function('spool_release', gathering(release))
redis.register_function('spool_reconcile', gathering(reconcile))
redis.register_function('spool_cancel', gathering(cancel))
redis.register_function('spool_requeue', gathering(requeue))
redis.register_function('spool_delete', gathering(delete))
redis.register_function('spool_watch', gathering(watch))
redis.register_function('spool_control', gathering(control))
redis.register_function { function_name = 'spool_peek', callback = peek, flags = { 'no-writes' } }
redis.register_function { function_name = 'spool_status', callback = status,
  flags = { 'no-writes' } }
redis.register_function { function_name = 'spool_stats', callback = stats,
  flags = { 'no-writes' } }
redis.register_function { function_name = 'spool_dead', callback = dead, flags = { 'no-writes' } }
redis.register_function { function_name = 'spool_queues', callback = queues,
  flags = { 'no-writes' } }
redis.register_function { function_name = 'spool_version', callback = version,
  flags = { 'no-writes' } }
