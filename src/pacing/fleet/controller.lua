-- The pacing controller of one destination, shared by a fleet: the rules of
-- `src/pacing/control.rs`, on state kept in Redis, on Redis's clock, in one atomic call.
-- Loaded once as a library of Redis functions (Redis 7 on), or run as a script (see
-- `fleet/code.rs`); a call's `keys` and `args` are a script's KEYS and ARGV.
--
-- keys[1]: the state (a MessagePack map). keys[2]: the sends in flight (a sorted set: number by send time).
-- keys[3], keys[4]: the waiting line (sorted sets of requests: by first ask, by last ask).
-- "reserve" answers {0, wait, round, number, pace, served, window, remaining, open}: the slot is
-- taken, send after `wait` (µs); `pace` is the fleet's and `served` its delivery rate, in
-- thousandths of a request per second (both 0: not paced); the reported room it leaves in
-- is `remaining` of `window` (both -1: none); then 1 if the destination is open (0 else);
-- {1, wait}: the slow start's window is full; {2, wait}: a paced wait past the longest;
-- {3, wait}: not next, ask again after `wait`.
-- args[1]: "reserve", "answer", "release" or "leave". args[2]: the constants and settings,
-- separated by spaces (see `Args` in `fleet/store.rs`). args[3]: the time (ms), or -1 for
-- Redis's clock. Then, for "reserve":
-- the longest wait (ms), the seed and the rejoining process's pace alone (r/s; 0 for
-- none; see `Seed` in `fleet/store.rs`), how long the request has waited (ms) and its
-- name in the line (none: it skips the line), then answers, applied first. For "answer":
-- answers. An answer is nine values: the send's round and number, the answer (0 served,
-- 1 refused, 2 other), the delay asked (ms, or -1), the quota's remaining count and reset
-- (ms; -1 for none), whether that reset was a Unix time in whole seconds (1) or not (0),
-- and the room it left in (window and remaining, as "reserve" gave them). A send numbered 0
-- went without a reservation (its destination was open): it is numbered as it is told. "answer"
-- answers {0, 0, round, 0, 0, 0, -1, -1, open}. For "release":
-- the send's number. For "leave": the name of a request that no longer waits.
-- Times are milliseconds; rates are requests per second.

-- What a call is about, set at its start: the functions below read these.
local argv, K, F, LINE, SEEN, op, now, s
local BETA, C, MIN_RATE, DOUBLING, REOPEN, WINDOW, OPEN_WINDOW, STALL
local FIRST_PROBE, MAX_PROBE, MAX_COOLDOWN, KNOWN, INITIAL_WINDOW, TTL, SPREAD_SPENT

-- How much sooner than a reset given in whole Unix seconds its count may come back (ms).
local COARSE = 1000
-- How late a timer may wake a paced send (ms): tokio's timers have millisecond resolution.
local TIMER_GRAIN = 1

-- A request's name is its process's number times PROCESS, plus its own number there.
local PROCESS = 2097152
local function process_of(name)
  return math.floor(tonumber(name) / PROCESS)
end

local function leave_line(name)
  if name == nil then return end
  redis.call('ZREM', LINE, name)
  redis.call('ZREM', SEEN, name)
end

-- A new destination's pace: the known rate, else a slow start from the initial window.
local function begin()
  s.born, s.ss, s.sc, s.sp, s.sn, s.mark = now, now, 0, 0, 0, now - STALL
  s.lr, s.cs, s.w, s.ds, s.dc, s.dp = nil, nil, nil, nil, nil, nil
  if KNOWN > 0 then
    s.cs, s.cb, s.cc, s.cu = now, KNOWN, KNOWN, 0
  elseif INITIAL_WINDOW > 0 then
    s.w = INITIAL_WINDOW
  end
end


-- Sliding-window counts of successes: `s`, over WINDOW, the delivery rate; `d`, over
-- DOUBLING, since the start-up began (the burst a limiter let through before is not a rate).
local function roll(p, span)
  local elapsed = now - s[p .. 's']
  if elapsed < span then return end
  local windows = math.floor(elapsed / span)
  s[p .. 'p'] = (windows == 1) and s[p .. 'c'] or 0
  s[p .. 'c'] = 0
  s[p .. 's'] = s[p .. 's'] + windows * span
end
local function in_window(p, span)
  p, span = p or 's', span or WINDOW
  roll(p, span)
  return s[p .. 'p'] * (1 - (now - s[p .. 's']) / span) + s[p .. 'c']
end
local function served_rate(min_span)
  local span = math.min(math.max(now - s.born, min_span), math.max(WINDOW, min_span))
  return in_window() / (span / 1000)
end

-- The reported room left, after the sends since its report.
local function room_left()
  if s.rt ~= nil and now >= s.rt then
    -- A report of a send before the reset passed, with no more room, tells of the window
    -- that ended. The next window is guessed as full as this one, for as long; a guess
    -- is not guessed on.
    s.rx, s.rxr = s.rt, s.rr
    -- The sends by the reset (and by the one before), those then in flight, and the room
    -- of the window that ended, for the first report since (see starts_over).
    local after = redis.call('ZCOUNT', F, s.rt, '+inf')
    s.xb, s.xs, s.xr, s.xsp, s.xu = s.xs or 0, s.sends - after, s.rf, s.rs, 1
    s.xrt, s.rtt = s.rtt or 0, 0
    s.xf = redis.call('ZCARD', F) - after
    if s.rg == nil and s.rs ~= nil and now < s.rt + s.rs then
      s.rn, s.rr, s.rt, s.rg = s.sends, s.rf, s.rt + s.rs, 1
    else
      s.rn, s.rr, s.rt, s.rf, s.rs, s.rg, s.rw = nil, nil, nil, nil, nil, nil, nil
    end
    s.rpf, s.rp, s.ro = nil, nil, nil
  end
  if s.rt == nil then return nil end
  -- The sends in flight that may count in this window: those sent within its length.
  local flying = redis.call('ZCOUNT', F, '(' .. (now - (s.rs or 60000)), '+inf')
  return math.max(s.rr - math.max(s.sends - s.rn, flying), 0)
end

local function curve_rate()
  local t = math.max(now - s.cs, 0) / 1000
  if s.cu == 1 then return s.cb * 2 ^ (t / (DOUBLING / 1000)) end
  local gap = math.max(s.cc - s.cb, 0)
  local k = (gap / (C * s.cc)) ^ (1 / 3)
  local x = t - k
  return math.max(s.cc * (1 + C * x * x * x), s.cb)
end

-- When a reported room ends, at the earliest (nil: known to the millisecond) and at the
-- latest: its reset, or as the length of a window opened by a request bounds it.
local function room_ends()
  local from, until_ = s.rpf, s.rt
  if s.ro ~= nil then
    if from ~= nil then from = math.max(from, s.ro + (s.dlo or 0)) end
    if s.dhi ~= nil then until_ = math.min(until_, s.ro + s.dhi) end
  end
  return from, until_
end

-- The pace that spreads `left` sends until the room's latest end (nil: none left, or past it).
local function spread_rate(left)
  if left == nil or left <= 0 then return nil end
  local _, until_ = room_ends()
  if until_ <= now then return nil end
  return left * 1000 / (until_ - now)
end

-- Processes sharing a room race for it: the one whose answers come first takes it all.
-- Where a room ran out within REOPEN, the fleet spreads the next over what is left of it,
-- to its latest end: spent early, a room holds every process until a probe finds the next.
local function room_rate()
  if SPREAD_SPENT <= 0 or s.rso == nil or now >= s.rso + REOPEN then return nil end
  local spread = spread_rate(room_left())
  return spread and math.max(spread, MIN_RATE)
end

local function rate()
  if s.lr ~= nil and now >= s.lr + REOPEN and KNOWN <= 0 then s.cs = nil end
  if s.cs == nil then return room_rate() end
  local r = curve_rate()
  if s.cu == 1 then
    -- BBR's start-up paces at most at twice what is delivered lately.
    local recent = s.ds and in_window('d', DOUBLING) * 1000 / DOUBLING or 0
    r = math.min(r, 2 * math.max(recent, s.cb))
  end
  -- The floor is the learned pace's; a known rate or a reported room may be slower.
  r = math.max(r, MIN_RATE)
  -- A known rate spreads the sends already: the fleet, one client, is alone at its
  -- quota, and a reported room only closes when spent.
  local left = room_left()
  local spread = KNOWN <= 0 and spread_rate(left)
  if spread then r = math.min(r, spread) end
  if KNOWN > 0 then r = math.min(r, KNOWN) end
  return r
end

-- Until when a spent room holds the sends: its reset. Where that is known only to the
-- second, a probe goes halfway through what is left of that second (a bisection), unless
-- one is in flight or less than a probing delay is left.
local function held_until()
  if room_left() ~= 0 then return nil end
  s.rso = now -- the room ran out (see room_rate)
  if s.rpf == nil or s.rp ~= nil then return s.rt end
  local from, until_ = room_ends()
  local at = until_
  if until_ - from >= FIRST_PROBE then at = from + (until_ - from) / 2 end
  if now < at then return at end
  return nil
end

-- Until when the first send into a window guessed at a reset goes alone, until a count is
-- seen to start over at one (see starts_over): a sliding window reporting its length as a
-- reset would count the guess's burst into a window still full. The others wait for its
-- answer two of the last window's longest round trips at most (and DOUBLING).
local function checking_until()
  if s.so ~= nil or s.rg == nil or s.xu == nil then return nil end
  local first = nil
  local flying = redis.call('ZRANGE', F, 0, -1, 'WITHSCORES')
  for i = 1, #flying, 2 do
    if tonumber(flying[i]) > s.xs then first = math.min(first or math.huge, tonumber(flying[i + 1])) end
  end
  local until_ = first and first + math.min(2 * (s.xrt or 0), DOUBLING)
  if until_ ~= nil and now < until_ then return until_ end
  return nil
end

local function closed_until()
  local until_ = nil
  if s.cl ~= nil and s.cl > now then until_ = s.cl end
  for _, held in ipairs({held_until() or false, checking_until() or false}) do
    if held then until_ = math.max(until_ or 0, held) end
  end
  return until_
end

-- Open: neither paced nor closed, past its slow start, no room reported. A process's
-- requests then go without a reservation, their answers told in batches.
local function open_now()
  return s.w == nil and s.rt == nil and rate() == nil and closed_until() == nil
end

local function set_curve(base, ceiling, startup)
  s.cs, s.cb, s.cc, s.cu = now, base, ceiling, startup
  if startup == 1 then s.ds, s.dc, s.dp = now, 0, 0 else s.ds, s.dc, s.dp = nil, nil, nil end
end

-- The slow start's limit, and when its cap doubles next; nil: open from OPEN_WINDOW on.
-- The limit is the window and, unless a reported room bounds the sends, at most the
-- initial window doubled per DOUBLING of the destination's life.
local function window_at()
  if s.w == nil then return nil end
  local doublings = math.floor(math.max(now - s.born, 0) / DOUBLING)
  local limit = s.w
  if s.rt == nil then limit = math.min(s.w, INITIAL_WINDOW * 2 ^ math.min(doublings, 31)) end
  if limit >= OPEN_WINDOW then
    s.w = nil
    return nil
  end
  return limit, s.born + (doublings + 1) * DOUBLING
end

local function close_for(delay)
  local until_ = now + math.min(delay, MAX_COOLDOWN)
  if s.cl ~= nil and s.cl >= until_ then return end
  s.cl, s.ls = until_, nil
  if s.cs ~= nil then s.cs = math.max(s.cs, until_) end
end

-- The pace after a refusal: a start-up first, then CUBIC's cuts of the delivery rate.
local function cut()
  local paced, r = s.cs ~= nil, rate()
  if paced and r ~= nil then
    local served = math.min(served_rate(DOUBLING), r)
    set_curve(math.max(BETA * served, MIN_RATE), math.max(served, MIN_RATE), 0)
  else
    local served = math.max(in_window(), 1000 / FIRST_PROBE, MIN_RATE)
    set_curve(served, served, 1)
  end
end

local function probe(asked, quiet, by)
  s.pr = math.min(math.max(s.pr * 2, FIRST_PROBE), MAX_PROBE)
  if quiet then set_curve(1000 / s.pr, 1000 / s.pr, 1) end
  -- A probe keeps the pace's spacing: sooner, it would send faster than the pace.
  -- After a silence, the pace is the probes' own: only a known rate spaces them.
  local r = nil
  if not quiet then r = rate() elseif KNOWN > 0 then r = KNOWN end
  local spacing = r and 1000 / r or 0
  local delay = s.pr
  if by ~= nil then delay = math.min(delay, by - now) end
  close_for(math.max(asked or delay, spacing))
end

-- Whether nothing was served for a window. A destination younger than that, its rate
-- unknown, knows it only once nothing else sent is pending: its first burst's refusal may
-- come before its successes.
local function silent(number)
  if in_window() > 0 then return false end
  if now - s.born >= WINDOW or KNOWN > 0 then return true end
  local others = redis.call('ZCARD', F)
  if redis.call('ZSCORE', F, number) then others = others - 1 end
  return others == 0
end

local function refused(round, number, asked)
  if room_left() == 0 then
    -- A delay asked that ends within a second of a reset known only to the second is
    -- that end rounded too: it bounds the reset, and the probes go on.
    if asked ~= nil and s.rpf ~= nil and now + asked <= s.rt + COARSE then
      s.rt = math.min(s.rt, now + asked)
    elseif asked ~= nil then
      close_for(asked)
    end
    return
  end
  if round ~= s.rd then return end
  s.rd = s.rd + 1
  local served = s.sn > 0
  s.sn = 0
  if served or s.cs == nil then
    cut()
    s.lc = now
  end
  if served then return end
  local quiet = silent(number)
  -- Past its first window, the first success after resumes the pace served before (s.qb,
  -- s.qc, s.qu), or starts a destination that never served over.
  if quiet and now - s.born >= WINDOW and s.q == nil then
    s.q = 1
    if s.sa == 1 then s.qb, s.qc, s.qu = s.cb, s.cc, s.cu end
  end
  -- Asked no delay, a probe comes by a window after the cut: a window's count has
  -- passed by then.
  local by = nil
  if asked == nil and not quiet and s.lc ~= nil and s.lc + WINDOW > now then by = s.lc + WINDOW end
  if not quiet then asked = nil end
  probe(asked, quiet, by)
end

-- When the next send may leave, whether it is held by a pace (else by the window), and
-- the spacing of sends at that pace (ms; 0 when not paced).
local function slot()
  local closed = closed_until()
  local r = rate()
  if r ~= nil then
    local next = now
    if s.ls ~= nil then next = math.max(next, s.ls + 1000 / r) end
    return math.max(next, closed or now), true, 1000 / r
  end
  if closed ~= nil then return closed, true, 0 end
  if s.w == nil then return now, false, 0 end
  -- Each send stalled for STALL since the last look widens the window, as an answer would.
  local stalled = redis.call('ZCOUNT', F, '(' .. s.mark, now - STALL)
  s.mark = now - STALL
  if stalled > 0 then s.w = s.w + stalled end
  local limit, doubles_at = window_at()
  if limit == nil then return now, false, 0 end
  if redis.call('ZCOUNT', F, '(' .. s.mark, '+inf') < limit then return now, false, 0 end
  local starting = redis.call('ZRANGEBYSCORE', F, '(' .. s.mark, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  return math.min(tonumber(starting[2]) + STALL, doubles_at), false, 0
end

-- Whether a report of `remaining` for a send that left in `seen_window` with
-- `seen_remaining` is of the live window. A guess holds what does not pass it. A send that
-- left after a report of this window was counted after it: more room is a new window.
-- One that left before may have been counted first, so more room tells nothing.
local function holds(seen_window, seen_remaining, remaining)
  if s.rg ~= nil then return remaining <= s.rr end
  if seen_window >= 0 and seen_window == s.rw then return remaining <= seen_remaining end
  return true
end

-- Reads the first report since the last reset. A window that starts over counts only the
-- sends since (and those in flight then): at most all made by now, as sends leaving together
-- are counted in any order. One that counts more, yet no more than the fleet
-- sent since the reset before, still counts its sends from before the reset: a sliding
-- window reporting its length as a reset. Its reports are not read from then on; it is
-- paced at its quota over its length, as after a refusal.
local function starts_over(number, remaining)
  if s.xu == nil or number <= s.xs then return end
  s.xu = nil
  local counted = s.xr - remaining
  if s.sends - s.xs + s.xf < counted and counted <= s.sends - s.xb + s.xf then
    s.sl, s.w = 1, nil
    s.rn, s.rr, s.rt, s.rf, s.rs, s.rg, s.rw, s.rpf, s.rp, s.ro = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
    if s.xsp ~= nil and s.xsp > 0 then
      local r = math.max(s.xr * 1000 / s.xsp, MIN_RATE)
      set_curve(r, r, 0)
      s.lr = now
    end
  else
    s.so = 1
  end
end

-- The first success after a silence: the pace served before resumes from its start, or a
-- destination that never served starts over as a new one, with a slow start from the
-- initial window (TCP's after a retransmission timeout).
local function start_over()
  local base, ceiling, startup = s.qb, s.qc, s.qu
  s.q, s.qb, s.qc, s.qu, s.ls = nil, nil, nil, nil, nil
  if base ~= nil then
    set_curve(base, ceiling, startup)
  else
    begin()
  end
end

-- Learns from the answer to send `number`, then takes it out of the sends in flight.
local function answered(round, number, answer, asked, remaining, reset, coarse, seen_window, seen_remaining)
  if asked <= 0 then asked = nil end
  room_left() -- a room whose reset passed gives way to its guess first
  -- A send numbered 0 went without a reservation: it is not among the sends in flight.
  local reserved = number ~= 0
  local sent_at = nil
  if reserved then
    sent_at = tonumber(redis.call('ZSCORE', F, number))
  else
    s.sends = s.sends + 1
    number = s.sends
  end
  if sent_at ~= nil then s.rtt = math.max(s.rtt or 0, now - sent_at) end
  local last_opened = s.ro
  if s.rx ~= nil and sent_at ~= nil and sent_at < s.rx and remaining <= (s.rxr or -1) then
    remaining = -1
  end
  if remaining >= 0 and reset >= 0 then starts_over(number, remaining) end
  if s.sl ~= nil then remaining = -1 end
  if remaining >= 0 and s.rn ~= nil and number < s.rn then
    -- An older send's report only lowers a live room: the server counted that send after
    -- the later one's report, as requests overtake each other on the way.
    if now < s.rt then s.rr = math.min(s.rr, remaining) end
  elseif remaining >= 0 and reset >= 0 then
    -- Resets are rounded up: each report of a window bounds its end (a guess does not).
    local span = math.min(reset, MAX_COOLDOWN)
    local at = now + span
    -- One in whole Unix seconds may pass up to a second sooner.
    local from = nil
    if coarse == 1 then from = math.max(at - COARSE, now) end
    if s.rt ~= nil and now < s.rt and holds(seen_window, seen_remaining, remaining) then
      if s.rg == nil then
        s.rt, remaining = math.min(at, s.rt), math.min(remaining, s.rr)
        if s.rpf ~= nil and (from == nil or s.rpf > from) then from = s.rpf end
        s.rpf = from
      else
        -- The window's first report: its count, and the sends since the reset (at most
        -- the guess: a report with more room is a new window).
        s.rt, s.rf = at, math.min(remaining + math.max(number - s.rn - 1, 0), s.rf)
        s.rw, s.rpf, s.rp = number, from, nil
      end
    else
      s.rt, s.rf, s.rs, s.rw, s.rpf, s.rp = at, remaining, span, number, from, nil
    end
    s.rn, s.rr, s.rg = number, remaining, nil
  end
  -- This send's report began the window's record: it opened the window, if any did. The
  -- length of windows opened by a request, with a reset known only to the second: a new
  -- window's opener bounds the last one's from above, a refused probe from below.
  -- Bounds that cross are forgotten.
  if s.rt ~= nil and s.rg == nil and s.rw == number then
    if s.rpf ~= nil and last_opened ~= nil and sent_at ~= nil then
      s.dhi = math.min(s.dhi or math.huge, sent_at - last_opened)
    end
    s.ro = sent_at
  end
  if s.rp ~= nil and s.rp == number then
    -- The reset came after the probe left.
    if sent_at ~= nil and (s.rpf == nil or sent_at > s.rpf) then s.rpf = sent_at end
    s.rp = nil
    if answer == 1 and s.ro ~= nil and sent_at ~= nil then s.dlo = math.max(s.dlo or 0, sent_at - s.ro) end
  end
  if (s.dlo or 0) >= (s.dhi or math.huge) then s.dlo, s.dhi = nil, nil end
  if answer == 0 then
    if s.q == 1 then start_over() end
    s.sa = 1
    roll('s', WINDOW)
    s.sc = s.sc + 1
    if s.ds ~= nil then
      roll('d', DOUBLING)
      s.dc = s.dc + 1
    end
    if round == s.rd then s.sn = s.sn + 1 end
    s.pr = 0
    if s.cs == nil and s.w ~= nil and remaining ~= 0 then s.w = s.w + 1 end
  elseif answer == 1 then
    s.lr = now
    s.w = nil
    refused(round, number, asked)
  end
  -- Released after: a refusal counts the answered send in flight, as in-process.
  if reserved then redis.call('ZREM', F, number) end
end

-- The answers given from argv[first] on, nine values each (see the header).
local function answer_all(first)
  local i = first
  while argv[i + 8] ~= nil do
    local a = {}
    for k = 0, 8 do a[k + 1] = tonumber(argv[i + k]) end
    answered(a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9])
    i = i + 9
  end
end

-- Request `name` (nil: none), waiting since `since`, joins the line or stays in it.
-- Waiting requests ask again within a DOUBLING: one not seen for two has gone.
local function join_line(name, since)
  if name == nil then return end
  redis.call('ZADD', LINE, 'NX', since, name)
  redis.call('ZADD', SEEN, now, name)
  redis.call('PEXPIRE', LINE, TTL)
  redis.call('PEXPIRE', SEEN, TTL)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', SEEN, '-inf', now - 2 * DOUBLING)) do
    redis.call('ZREM', LINE, gone)
    redis.call('ZREM', SEEN, gone)
  end
end

-- How many requests of other processes are ahead of request `name` (nil: not in line),
-- in line from `since`: the request that has waited longest, in whichever process, takes
-- the next send. A process asks for its held requests through the one it holds longest,
-- which stands for its first in line here (their clocks differ a little).
local function ahead_in_line(name, since)
  if name == nil then return 0 end
  join_line(name, since)
  local rank, ahead, own = redis.call('ZRANK', LINE, name), 0, process_of(name)
  if rank == 0 then return 0 end
  for _, other in ipairs(redis.call('ZRANGE', LINE, 0, rank - 1)) do
    if process_of(other) == own then break end
    ahead = ahead + 1
  end
  return ahead
end

-- The settings, parsed once per distinct text: a fleet has a few. As a script, once per call.
local SETTINGS, SETTINGS_HELD = {}, 0
local function settings_of(text)
  local found = SETTINGS[text]
  if found then return found end
  found = {}
  for value in string.gmatch(text, '%S+') do found[#found + 1] = tonumber(value) end
  if SETTINGS_HELD >= 64 then SETTINGS, SETTINGS_HELD = {}, 0 end
  SETTINGS[text], SETTINGS_HELD = found, SETTINGS_HELD + 1
  return found
end

-- Reads what a call is about: its keys, its settings and the time.
local function read_call(keys, args)
  K, F, LINE, SEEN = keys[1], keys[2], keys[3], keys[4]
  argv, op = args, args[1]
  local c = settings_of(args[2])
  BETA, C, MIN_RATE, DOUBLING = c[1], c[2], c[3], c[4]
  REOPEN, WINDOW, OPEN_WINDOW, STALL = c[5], c[6], c[7], c[8]
  FIRST_PROBE, MAX_PROBE, MAX_COOLDOWN = c[9], c[10], c[11]
  KNOWN, INITIAL_WINDOW, TTL, SPREAD_SPENT = c[12], c[13], math.ceil(c[14]), c[15]
  now = tonumber(argv[3])
  if now < 0 then
    local clock = redis.call('TIME')
    now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
  end
end

-- Reads the state Redis holds (`packed`), or makes a new one where it holds none.
local function read_state(packed)
  s = packed and cmsgpack.unpack(packed) or {}
  -- Only a reservation says a seed and a rejoining pace; other operations carry answers there.
  local seed, rejoin = 0, 0
  if op == 'reserve' then seed, rejoin = tonumber(argv[5] or 0), tonumber(argv[6] or 0) end
  if s.born == nil then
    -- A new destination, or one Redis lost: the known pace, else the pace alone of the
    -- process rejoining, else the pace the process asking saw it served at lately (the
    -- seed), else a slow start.
    begin()
    s.rd, s.sends, s.pr = 0, 0, 0
    if rejoin > 0 then seed, s.rb = rejoin, now end
    if KNOWN <= 0 and seed > 0 then
      -- Paced as after a cut to the seed; it opens again as a learned pace does. It served
      -- at the seed over the last window: a refusal now cuts from there, not from nothing.
      s.cs, s.cb, s.cc, s.cu, s.lr, s.sa, s.w = now, seed, seed, 0, now, 1, nil
      s.born, s.sp = now - WINDOW, seed * WINDOW / 1000
    end
  elseif rejoin > 0 and s.rb ~= nil and now < s.rb + WINDOW and s.cs ~= nil and KNOWN <= 0 then
    -- Another process rejoins the state rebuilt from rejoining ones: its pace joins the
    -- fleet's, which it sent at alone until now.
    s.cb, s.cc, s.sp = s.cb + rejoin, s.cc + rejoin, s.sp + rejoin * WINDOW / 1000
  end
end

-- A reply that gives no slot: `status` (see the header) and `wait` (ms).
local function reply(status, wait)
  return {status, math.floor(wait * 1000), 0, 0, 0, 0, -1, -1, 0}
end

-- Takes the slot at `at`, `wait` from now, at a pace of one per `spacing` (0: not paced).
local function take(at, wait, spacing)
  -- A send that leaves a spent room known only to the second probes it.
  local probing = s.rpf ~= nil and room_left() == 0
  s.sends = s.sends + 1
  if probing then s.rp = s.sends end
  -- Less than one spacing after its slot, a send counts at the slot (GCRA's theoretical
  -- arrival time): a request late by a round trip slows no later one. Up to a timer tick
  -- later, a tick before it left, as timers wake a tick late.
  local due = s.ls and s.ls + spacing
  local late = (spacing > 0 and due ~= nil and due <= at) and at - due or math.huge
  if late < spacing then
    s.ls = due
  elseif late < spacing + TIMER_GRAIN then
    s.ls = math.max(due, at - TIMER_GRAIN)
  else
    s.ls = at
  end
  redis.call('ZADD', F, at, s.sends)
  redis.call('PEXPIRE', F, TTL)
  local pace = (spacing > 0) and 1000 / spacing or 0
  local served = (spacing > 0) and served_rate(DOUBLING) or 0
  local seen_window, seen_remaining = -1, -1
  if s.rt ~= nil and s.rg == nil then seen_window, seen_remaining = s.rw, s.rr end
  local open = open_now() and 1 or 0
  return {0, math.floor(wait * 1000), s.rd, s.sends, math.floor(pace * 1000), math.floor(served * 1000), seen_window, seen_remaining, open}
end

-- Reserves a slot, after telling the answers carried (unless the state is new: answers
-- to a state Redis lost tell nothing of the one rebuilt).
local function reserve(known)
  if known then answer_all(9) end
  local max_wait = tonumber(argv[4])
  local name = argv[8]
  local since = now - tonumber(argv[7] or 0)
  local at, throttled, spacing = slot()
  local wait = at - now
  -- Sends held by a pace or by the slow start's window go in line. A request held by a
  -- closed destination leaves it: it asks again as the destination opens, and comes back
  -- at its first ask's place, so the line holds no one who does not ask.
  local windowed = not throttled and s.w ~= nil
  if spacing <= 0 and not windowed then
    if throttled then leave_line(name) end
    name = nil
  end
  local ahead
  local function line_ahead()
    ahead = ahead or ahead_in_line(name, since)
    return ahead
  end
  if throttled and wait > max_wait then
    leave_line(name)
    return reply(2, wait)
  elseif not throttled and wait > 0 then
    join_line(name, since)
    return reply(1, wait)
  elseif windowed and name ~= nil and redis.call('EXISTS', LINE) == 1 and line_ahead() > 0 then
    -- Room goes to the request that waited longest. The process whose answer made it asks
    -- within microseconds, the others every 10 ms (`ASK_AGAIN` in `fleet/ticket.rs`).
    return reply(1, DOUBLING)
  elseif wait > 0 and (line_ahead() > 0 or wait > spacing / 2 + 0.001) then
    -- Only the next slot is given (GCRA's burst of one), in the half spacing before it.
    -- A request asks again then, or half a spacing before its own slot at today's pace,
    -- behind older requests: the line costs a call per slot, not one per waiter. Slots
    -- given ahead could not be taken back; a slot due and not taken goes to whoever asks.
    -- (The microsecond absorbs rounding.)
    local own = wait + (ahead - 0.5) * spacing
    if ahead > 0 then own = math.max(own, spacing / 2) end
    return reply(3, own)
  else
    -- Out of the line, if it joined it while held.
    leave_line(argv[8])
    return take(at, wait, spacing)
  end
end

-- One call: the operation `args[1]` on the destination whose keys are `keys`.
local function call(keys, args)
  read_call(keys, args)
  -- Leaving the line touches no state.
  if op == 'leave' then
    leave_line(argv[4])
    return reply(0, 0)
  end
  local packed = redis.call('GET', K)
  -- An answer or a release for a state Redis lost tells nothing of the state that replaces it.
  if not packed and op ~= 'reserve' then return reply(0, 0) end
  read_state(packed)
  -- Sends unanswered for a minute belong to a process that is gone: swept once a second.
  if now >= (s.gc or 0) + 1000 then
    redis.call('ZREMRANGEBYSCORE', F, '-inf', now - 60000)
    s.gc = now
  end
  local result
  if op == 'reserve' then
    result = reserve(packed ~= nil)
  elseif op == 'answer' then
    answer_all(4)
    result = {0, 0, s.rd, 0, 0, 0, -1, -1, open_now() and 1 or 0}
  else
    redis.call('ZREM', F, tonumber(argv[4]))
    if s.rp == tonumber(argv[4]) then s.rp = nil end
    result = reply(0, 0)
  end
  -- Written back whole. Every key expires with the destination's idleness, counted from
  -- its last write.
  redis.call('SET', K, cmsgpack.pack(s), 'PX', TTL)
  return result
end

-- Loaded as a library (`FUNCTION LOAD`), the call is registered once; run as a script
-- (`EVAL`, Redis before 7), it is made at once.
if redis.register_function ~= nil then
  redis.register_function(FUNCTION_NAME, call)
else
  -- A script's call is not refused when Redis is full (`noeviction`), as a function's is:
  -- only its first write that may grow it is. This one grows nothing.
  redis.call('ZADD', KEYS[2], 'XX', 0, '')
  return call(KEYS, ARGV)
end
