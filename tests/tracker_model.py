"""A small dict-per-offset model of the in-flight tracker, the referee of the differential test.

It keeps one Python record per offset and recomputes everything by brute force, so it is slow and
obviously right where the twins are fast and clever. Entry boundaries are kept only because Kafka's
rules depend on them (producer-batch granularity, throttled batch sizes).
"""

from __future__ import annotations

from sharegroup.errors import Errors, ShareError
from sharegroup.types import AcquiredRecords, RecordState, RecordView, StateBatch

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVING, ARCHIVED = (int(s) for s in RecordState)
TERMINAL = (ACKNOWLEDGED, ARCHIVED)


class Rec:
    __slots__ = ("state", "delivery_count", "member", "deadline", "tid")

    def __init__(self, state, delivery_count, member="", deadline=0):
        self.state, self.delivery_count, self.member = state, delivery_count, member
        self.deadline, self.tid = deadline, 0


class TrackerModel:
    def __init__(self, start_offset=0, *, record_lock_duration_ms=30000, delivery_count_limit=5,
                 partition_max_record_locks=2000, record_limit_mode=False, dead_letter_queue=False):
        self.dead_letter_queue = dead_letter_queue  # REJECT and the limit go to ARCHIVING, not ARCHIVED
        self.lock_ms = record_lock_duration_ms
        self.limit = delivery_count_limit
        self.max_locks = partition_max_record_locks
        self.record_limit = record_limit_mode
        self.throttle = max(2, (self.limit + 1) // 2)
        self.spso = self.speo = start_offset
        self.recs: dict[int, Rec] = {}
        self.entries: list[list[int]] = []  # [first, last], sorted
        self.trans: dict[int, tuple[str, list[int]]] = {}
        self.next_tid = 1
        self.gap_start, self.gap_end = 0, -1  # persisted-gap window; open while gap_end >= 0

    def _holes(self):
        """The acquirable holes of the persisted-gap window (empty when it is closed)."""
        if self.gap_end < 0:
            return []
        return [o for o in range(max(self.spso, self.gap_start), self.gap_end) if o not in self.recs]

    # -- observables
    @property
    def start_offset(self):
        return self.spso

    @property
    def end_offset(self):
        return self.speo

    @property
    def in_flight_count(self):
        return self.speo - self.spso

    @property
    def delivery_complete_count(self):
        return self._terminal_from(self.spso)

    def _terminal_from(self, s):
        return sum(1 for o, r in self.recs.items() if o >= s and r.state in TERMINAL)

    def next_fetch_offset(self):
        found = [o for o, r in self.recs.items() if o >= self.spso and r.state == AVAILABLE and not r.tid]
        return min(found + self._holes()[:1] + [self.speo])

    def record_state(self, o):
        if o < self.spso or o >= self.speo or o not in self.recs:
            return None
        r = self.recs[o]
        return RecordView(RecordState(r.state), r.delivery_count, r.member)

    def state_batches(self):
        out = []
        for o in sorted(self.recs):
            if o < self.spso:
                continue
            r = self.recs[o]
            if out and out[-1][1] + 1 == o and out[-1][2] == r.state and out[-1][3] == r.delivery_count:
                out[-1][1] = o
            else:
                out.append([o, o, r.state, r.delivery_count])
        return [StateBatch(*b) for b in out]

    # -- helpers
    def _scan(self, tid=0):
        """Where the SPSO lands: past terminal records not awaiting a write (or awaiting `tid`) and past
        holes, except that an open gap window stops it at a hole at the SPSO or at/above the gap start."""
        for o in range(self.spso, self.speo):
            r = self.recs.get(o)
            if r is None:
                if self.gap_end >= 0 and (o == self.spso or o >= self.gap_start):
                    return o
                continue
            if r.state in TERMINAL and (not r.tid or r.tid == tid):
                continue
            return o
        return self.speo

    def _close_window(self):
        if self.gap_end >= 0 and (self.speo != self.gap_end or self.spso >= self.gap_end):
            self.gap_end = -1

    def _advance(self, acquisition=False):
        self._close_window()
        if not (acquisition and self.spso not in self.recs):  # an acquisition leaves an uncovered SPSO
            self.spso = max(self.spso, self._scan())
        while self.entries:
            f, last = self.entries[0]
            if last >= self.spso:
                break
            if not all(self.recs[o].state in TERMINAL and not self.recs[o].tid for o in range(f, last + 1)):
                break
            for o in range(f, last + 1):
                del self.recs[o]
            self.entries.pop(0)
        if not self.entries:
            self.speo = max(self.speo, self.spso)
        self._close_window()

    def _entry_of(self, o):
        for e in self.entries:
            if e[0] <= o <= e[1]:
                return e
        return None

    # -- operations
    def load(self, start_offset, batches):
        self.spso = self.speo = start_offset
        self.recs.clear()
        self.entries.clear()
        self.trans.clear()
        self.gap_start, self.gap_end = 0, -1
        pos = start_offset
        for f, last, s, delivery_count in batches:
            if f > pos and self.gap_end < 0:
                self.gap_start, self.gap_end = pos, 0  # gap_end is set to the SPEO below
            self.entries.append([f, last])
            for o in range(f, last + 1):
                self.recs[o] = Rec(AVAILABLE if s == ACQUIRED else s, min(delivery_count, 255))
            pos = last + 1
        self.speo = pos
        if self.gap_end >= 0:
            self.gap_end = pos
        self._advance()

    def acquire(self, member, fetched, max_records, now, fetch_offset=-1, batch_size=0, aborted=(),
                read_committed=False):
        if not isinstance(member, str) or not member:
            raise ShareError(Errors.INVALID_REQUEST)
        prev = -1
        for b in fetched:
            if b[0] < 0 or b[1] < b[0] or b[0] <= prev:
                raise ShareError(Errors.INVALID_REQUEST)
            prev = b[1]
        if max_records <= 0 or not fetched:
            return []
        if batch_size < 0:
            raise ShareError(Errors.INVALID_REQUEST)
        base = fetched[0][0]
        if 0 <= fetch_offset < base:
            for o in range(max(fetch_offset, self.spso), base):
                r = self.recs.get(o)
                if r and r.state == AVAILABLE and not r.tid:
                    r.state, r.member = ARCHIVED, ""
        deadline = now + self.lock_ms
        runs: list[list[int]] = []
        lo, hi = max(base, self.spso), fetched[-1][1]
        acquired = 0
        stop = False
        if hi >= lo:
            cursor = lo
            overlapped = False
            for e in list(self.entries):
                if e[1] < lo:
                    continue
                if e[0] > hi or stop or acquired >= max_records:
                    break
                overlapped = True
                if self.gap_end >= 0 and max(cursor, self.gap_start) < e[0]:
                    acquired += self._new(fetched, max(cursor, self.gap_start), e[0] - 1, member, deadline, runs,
                                          max_records - acquired, batch_size, True)
                    if acquired >= max_records:
                        break
                cursor = e[1] + 1
                a, b = max(e[0], lo), min(e[1], hi)
                avail = [o for o in range(a, b + 1) if self.recs[o].state == AVAILABLE and not self.recs[o].tid]
                if not avail:
                    continue
                max_delivery_count = max(self.recs[o].delivery_count for o in avail)
                throttled = max_delivery_count >= self.throttle
                if throttled and acquired > 0:
                    stop = True
                    break
                size = e[1] - e[0] + 1
                cap = max(1, size >> (max_delivery_count - self.throttle + 1)) if throttled else 1 << 62
                if self.record_limit:
                    cap = min(cap, max_records - acquired)
                got = 0
                stop = throttled
                for o in avail:
                    if got >= cap:
                        stop = True
                        break
                    r = self.recs[o]
                    last_attempt = self.limit > 2 and r.delivery_count == self.limit - 1
                    if last_attempt and acquired + got > 0:
                        stop = True
                        break
                    r.state, r.delivery_count, r.member, r.deadline = ACQUIRED, min(r.delivery_count + 1,
                                                                                    255), member, deadline
                    _add(runs, o, o, r.delivery_count)
                    got += 1
                    if last_attempt:
                        stop = True
                        break
                acquired += got
            if not stop and acquired < max_records:
                if self.gap_end >= 0 or not overlapped:
                    h0 = max(cursor, self.gap_start) if self.gap_end >= 0 else cursor
                    acquired += self._new(fetched, h0, min(hi, self.speo - 1), member, deadline, runs,
                                          max_records - acquired, batch_size, self.gap_end >= 0 and overlapped)
                if acquired < max_records and hi >= self.speo:
                    allowance = self.max_locks - (self.speo - self.spso)
                    acquired += self._new(fetched, max(cursor, self.speo), hi, member, deadline, runs,
                                          min(max_records - acquired, allowance), batch_size)
        if runs and self.gap_end >= 0:
            self.gap_start = max(self.gap_start, runs[-1][1] + 1)
        if read_committed and runs:
            runs = self._aborted(fetched, aborted, runs)
        self._advance(True)
        return [AcquiredRecords(*r) for r in runs]

    def _new(self, fetched, lo, hi, member, deadline, runs, budget, batch_size, whole=False):
        """New entries from the fetched offsets in [lo, hi]: whole producer batches until `budget`
        (counted from lo) is reached; batch_size cuts end each entry just before the next cut.

        `whole` (a persisted-gap hole between entries): all of [lo, hi], cut short by the budget at the
        end of the fetched batch holding lo + budget - 1 (or at that offset when none holds it)."""
        if budget <= 0 or hi < lo:
            return 0
        batches = [b for b in fetched if b[1] >= lo and b[0] <= hi]
        segs = []
        last = -1
        if whole:
            end = hi
            if budget < hi - lo + 1:
                c = lo + budget - 1
                end = next((min(b[1], hi) for b in batches if b[0] <= c <= b[1]), c)
            segs = [[lo, end]]
            for b in batches:
                if b[0] <= end and batch_size > 0 and b[0] - segs[-1][0] >= batch_size:
                    segs[-1][1] = b[0] - 1
                    segs.append([b[0], end])
            batches = []
        for b in batches:
            if last >= 0 and last - lo + 1 >= budget:
                break
            start, end = max(b[0], lo), min(b[1], hi)
            if segs and batch_size > 0 and start - segs[-1][0] >= batch_size:
                segs[-1][1] = start - 1
                segs.append([start, end])
            elif segs:
                segs[-1][1] = end
            else:
                segs.append([start, end])
            last = end
        if not segs:
            return 0
        if not any(o in self.recs for o in range(self.spso, segs[0][0])):
            self.spso = max(self.spso, segs[0][0])
        got = 0
        for f, last in segs:
            self.entries.append([f, last])
            self.entries.sort()
            for o in range(f, last + 1):
                if self.record_limit and got >= budget:
                    self.recs[o] = Rec(AVAILABLE, 0)
                else:
                    self.recs[o] = Rec(ACQUIRED, 1, member, deadline)
                    _add(runs, o, o, 1, batch_size == 0 or o != f)
                    got += 1
            self.speo = max(self.speo, last + 1)
        return got

    def _aborted(self, fetched, aborted, runs):
        pending = sorted((t[1], t[0]) for t in aborted)
        p = 0
        active = set()
        cut = set()
        for b in fetched:
            pid = b[2] if len(b) > 2 else -1
            txn = bool(b[3]) if len(b) > 3 else False
            control = bool(b[4]) if len(b) > 4 else False
            while p < len(pending) and pending[p][0] <= b[1]:
                active.add(pending[p][1])
                p += 1
            if control:
                cut.update(range(b[0], b[1] + 1))
                active.discard(pid)
            elif txn and pid in active:
                cut.update(range(b[0], b[1] + 1))
        out = []
        for f, last, delivery_count in runs:
            for o in range(f, last + 1):
                if o in cut:
                    r = self.recs[o]
                    if r.state == ACQUIRED:
                        r.state, r.member = ARCHIVED, ""
                else:
                    _add(out, o, o, delivery_count, o != f and o - 1 not in cut)
        return out

    def begin_acknowledge(self, member, batches, now):
        plan = []
        prev = -1
        for ab in batches:
            f, last, types = ab[0], ab[1], tuple(ab[2])
            if f < 0 or f > last or (plan and f <= prev) or not types or \
                    (len(types) != 1 and len(types) != last - f + 1) or any(not 0 <= t <= 4 for t in types):
                raise ShareError(Errors.INVALID_REQUEST)
            plan.append((f, last, types))
            prev = last
        for f, last, types in plan:
            if last < self.spso:
                continue
            if last >= self.speo:
                raise ShareError(Errors.INVALID_REQUEST)
            a = max(f, self.spso)
            if a not in self.recs:
                raise ShareError(Errors.INVALID_RECORD_STATE)
            for o in range(a, last + 1):
                r = self.recs.get(o)
                if r is None:
                    continue
                if r.state != ACQUIRED or r.tid or r.member != member:
                    raise ShareError(Errors.INVALID_RECORD_STATE)
        tid = self.next_tid
        changed = []
        writes = []
        for f, last, types in plan:
            if last < self.spso:
                continue
            for o in range(max(f, self.spso), last + 1):
                r = self.recs.get(o)
                if r is None:
                    continue
                t = types[0] if len(types) == 1 else types[o - f]
                if t == 4:
                    r.deadline = now + self.lock_ms
                    continue
                r.state = self._target(t, r.delivery_count)
                r.member, r.tid = "", tid
                changed.append(o)
                _add4(writes, o, r.state, r.delivery_count)
        return self._pending(member, changed, writes)

    def _limit_state(self):
        return ARCHIVING if self.dead_letter_queue else ARCHIVED

    def _target(self, t, delivery_count):
        if t == 1:
            return ACKNOWLEDGED
        if t == 2:
            return self._limit_state() if delivery_count >= self.limit else AVAILABLE
        if t == 3:
            return self._limit_state()
        return ARCHIVED

    def _pending(self, member, changed, writes):
        if not changed:
            return (0, [], self.spso, self._terminal_from(self.spso))
        tid = self.next_tid
        self.next_tid += 1
        self.trans[tid] = (member, changed)
        for o in changed:
            self.recs[o].tid = tid
        # The start offset once this transition commits: others' pending records still block.
        pos = self._scan(tid)
        return (tid, [StateBatch(*w) for w in writes], pos, self._terminal_from(pos))

    def begin_release(self, member, now):
        changed, writes = [], []
        tid = self.next_tid
        for o in sorted(self.recs):
            r = self.recs[o]
            if r.state == ACQUIRED and not r.tid and r.member == member and member:
                r.state = self._released_state(o, r.delivery_count)
                r.member, r.tid = "", tid
                changed.append(o)
                _add4(writes, o, r.state, r.delivery_count)
        return self._pending(member, changed, writes)

    def _released_state(self, o, delivery_count):
        """A released or expired record: the limit archives it (ARCHIVING with a DLQ), even below the SPSO."""
        if delivery_count >= self.limit:
            return self._limit_state()
        return ARCHIVED if o < self.spso else AVAILABLE

    def complete_archiving(self, first, last):
        if first < 0 or last < first:
            raise ShareError(Errors.INVALID_REQUEST)
        writes = []
        for o in range(first, last + 1):
            r = self.recs.get(o)
            if r is not None and r.state == ARCHIVING and not r.tid:
                r.state = ARCHIVED
                _add4(writes, o, r.state, r.delivery_count)
        if writes:
            self._advance()
        return (0, [StateBatch(*w) for w in writes], self.spso, self._terminal_from(self.spso))

    def complete(self, tid, committed, now):
        if tid not in self.trans:
            raise ShareError(Errors.INVALID_REQUEST)
        member, changed = self.trans.pop(tid)
        for o in changed:
            r = self.recs.get(o)
            if r is None or r.tid != tid:
                continue
            r.tid = 0
            if committed:
                continue
            if r.deadline <= now:
                r.state = ARCHIVED if (r.delivery_count >= self.limit or o < self.spso) else AVAILABLE
                r.member = ""
            else:
                r.state, r.member = ACQUIRED, member
        self._advance()

    def expire_locks(self, now):
        writes = []
        n = 0
        for o in sorted(self.recs):
            r = self.recs[o]
            if r.state == ACQUIRED and not r.tid and r.deadline <= now:
                r.state = self._released_state(o, r.delivery_count)
                r.member = ""
                n += 1
                _add4(writes, o, r.state, r.delivery_count)
        if n:
            self._advance()
        return n, (0, [StateBatch(*w) for w in writes], self.spso, self._terminal_from(self.spso))

    def update_log_start_offset(self, lso):
        if lso <= self.spso:
            return
        for o in range(self.spso, lso):
            r = self.recs.get(o)
            if r and r.state == AVAILABLE:
                r.state, r.member, r.tid = ARCHIVED, "", 0
        self.spso = lso
        self.speo = max(self.speo, lso)
        self._advance()


def _add(runs, f, last, delivery_count, merge=True):
    if merge and runs and runs[-1][1] + 1 == f and runs[-1][2] == delivery_count:
        runs[-1][1] = last
    else:
        runs.append([f, last, delivery_count])


def _add4(out, o, s, delivery_count):
    if out and out[-1][1] + 1 == o and out[-1][2] == s and out[-1][3] == delivery_count:
        out[-1][1] = o
    else:
        out.append([o, o, s, delivery_count])
