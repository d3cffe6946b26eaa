#!/usr/bin/env bash
# mutants.sh: break the code in known ways and check that the tests notice.
#
# Each mutant below is a bug that a test once let through (see issue
# "Tests that can fail"): a literal piece of source, what it becomes, and
# the tests that must then fail. The script copies the working tree to a
# scratch directory, applies one mutant at a time there (the repository is
# never touched), runs its tests, and expects them to FAIL. It exits non-zero
# when a mutant survives (its tests pass) or no longer applies (the code
# moved: update the mutant). Run it with `make mutants`, in CI and before
# a release. A run takes a few minutes, mostly compiling.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/depsd-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The working tree as it is (tracked and new files, not ignored ones).
(cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -C "$work" -xf -

failed=0
# mutant NAME FILE FROM TO -- COMMAND...: replace every FROM (literal) by TO
# in FILE, run COMMAND in the scratch tree, expect it to fail.
mutant() {
	local name=$1 file=$2 from=$3 to=$4
	shift 4
	[ "$1" = "--" ] && shift
	cp "$work/$file" "$work/$file.orig"
	if ! FROM=$from TO=$to perl -0777 -i -pe 'BEGIN { $f = $ENV{FROM}; $t = $ENV{TO} } $n += s/\Q$f\E/$t/g; END { exit($n ? 0 : 3) }' "$work/$file"; then
		echo "STALE    $name: the code to mutate is not in $file any more; update scripts/mutants.sh"
		failed=1
	else
		local log="$work/.mutant.log"
		if (cd "$work" && "$@") >"$log" 2>&1; then
			echo "SURVIVED $name: '$*' passed with $file mutated"
			tail -20 "$log" | sed 's/^/    /'
			failed=1
		else
			echo "killed   $name ($(grep -m1 -E -- '^--- FAIL' "$log" | sed 's/^--- FAIL: //; s/ (.*//' || true))"
		fi
	fi
	mv "$work/$file.orig" "$work/$file"
}

mutant "pipeline-creation throttle (400) taken as permanent" \
	gitlab/errors.go \
	'(e.Status == http.StatusBadRequest && strings.Contains(e.Message, "Too many pipelines"))' \
	'(false && strings.Contains(e.Message, "Too many pipelines"))' \
	-- go test -count=1 -run 'Throttle' ./gitlab/ ./chain/

mutant "outbox creates every pipeline twice (demo)" \
	chain/outbox.go \
	'p, err := e.cfg.GitLab.CreatePipeline(ctx, a.ProjectID, a.Ref, a.createOptions(chainID, noCacheRefused))' \
	'_, _ = e.cfg.GitLab.CreatePipeline(ctx, a.ProjectID, a.Ref, a.createOptions(chainID, noCacheRefused)); p, err := e.cfg.GitLab.CreatePipeline(ctx, a.ProjectID, a.Ref, a.createOptions(chainID, noCacheRefused))' \
	-- go test -count=1 -run 'TestDemo' ./demo/ ./cmd/depsd/

mutant "docker-registry missing in CI is skipped" \
	registry/registrytest/registrytest.go \
	'const Binary = "docker-registry"' \
	'const Binary = "docker-registry-not-installed"' \
	-- env CI=true go test -count=1 -run 'Registry' ./scheduler/

mutant "a 429 does not slow the other calls down" \
	gitlab/retry.go \
	'c.slowDown(resp, c.throttledFor(resp))' \
	'_ = c.throttledFor(resp)' \
	-- go test -count=1 -run 'TooManyRequests' ./gitlab/

mutant "incremental rescan never trusts last_activity_at" \
	gitlab/heads.go \
	'return known.Version != "" &&' \
	'return false && known.Version != "" &&' \
	-- go test -count=1 -run 'Incremental' ./gitlab/ ./scan/

mutant "scan reads every Containerfile name, not the first present" \
	scan/scan.go \
	'			chosen = append(chosen, name)
			break' \
	'			chosen = append(chosen, name)' \
	-- go test -count=1 ./scan/

mutant "settle skips the dependents of a member that changed" \
	chain/track.go \
	'		if visit(m) {' \
	'		if visit(m) && false {' \
	-- go test -count=1 -run 'IncrementalSettle|Failure' ./chain/

mutant "the engine changes a member without recording it (unblock): the store misses it" \
	chain/apply.go \
	'		m.Verified, m.VerifyDetail = "", ""
		c.changed(m)' \
	'		m.Verified, m.VerifyDetail = "", ""' \
	-- go test -count=1 -run 'Failure' ./chain/

mutant "a second save in one transaction writes only what changed after the first" \
	chain/track.go \
	'	return members, false' \
	'	b.changed = nil
	return members, false' \
	-- go test -count=1 -run 'SaveSet' ./chain/

mutant "the inbox applies the next event before saving what the last one changed: it misses the change" \
	chain/inbox.go \
	'	return t.saveChanges()
}' \
	'	return nil
}' \
	-- go test -count=1 -run 'InboxAppliesABacklog' ./chain/

mutant "PostgreSQL batches insert in the batch's order: two replicas deadlock" \
	store/events.go \
	'ORDER BY batch.k COLLATE "C"' \
	'ORDER BY n DESC' \
	-- go test -count=1 -run 'ReplicasDoNotDeadlock' ./store/

mutant "commits do not wake the checkpointer: the WAL grows" \
	store/store.go \
	'		s.ckpt.wrote()' \
	'' \
	-- go test -count=1 -run 'CheckpointerBoundsTheWAL' ./store/

mutant "urgent requests wait behind normal ones in the client's limiter" \
	gitlab/limiter.go \
	'normalsTurn := normal && (!(urgent || l.holding) || overdue <= 0)' \
	'normalsTurn := normal' \
	-- go test -count=1 -run 'Limiter|Transport' ./gitlab/

mutant "normal requests starve while urgent ones wait" \
	gitlab/limiter.go \
	'(!(urgent || l.holding) || overdue <= 0)' \
	'(!(urgent || l.holding))' \
	-- go test -count=1 -run 'Limiter' ./gitlab/

mutant "the client's hold does not hold normal requests" \
	gitlab/limiter.go \
	'(!(urgent || l.holding) || overdue <= 0)' \
	'(!urgent || overdue <= 0)' \
	-- go test -count=1 -run 'LimiterHolds' ./gitlab/

mutant "a rebuild lets background requests go while it decides the chain" \
	chain/rebuild.go \
	'	e.holdNormal(true)
	defer e.holdNormal(false)
' \
	'' \
	-- go test -count=1 -run 'RebuildHolds' ./chain/

mutant "the outbox lets background requests go while a create is in flight" \
	chain/outbox.go \
	'due := s.claiming || s.mayBeDue || len(s.slots) > 0' \
	'due := s.claiming || s.mayBeDue' \
	-- go test -count=1 -run 'OutboxHolds' ./chain/

mutant "the outbox's creates are not urgent" \
	chain/outbox.go \
	'gitlab.WithPriority(ctx, gitlab.PriorityUrgent)' \
	'ctx' \
	-- go test -count=1 -run 'Urgent' ./chain/

mutant "the reconciler reads what the inbox already holds" \
	chain/reconcile.go \
	'if err := e.awaitInbox(ctx, e.cfg.InboxWait); err != nil {' \
	'if err := error(nil); err != nil {' \
	-- go test -count=1 -run 'Reconcil' ./chain/

mutant "a claimed but unstarted scheduled rebuild is not resumed" \
	scheduler/fire.go \
	'if s.resumable(ctx, e, st, now, log) {' \
	'if false && s.resumable(ctx, e, st, now, log) {' \
	-- go test -count=1 -run 'Unfinished' ./scheduler/

mutant "an image change's pending rebuilds are not resumed" \
	scheduler/watch.go \
	'if st.Pending.Detail != "" {' \
	'if false && st.Pending.Detail != "" {' \
	-- go test -count=1 -run 'Pending' ./scheduler/

mutant "a limit announced with a 429 is held for good" \
	gitlab/limiter.go \
	'if !l.restoreAt.IsZero() && !now.Before(l.restoreAt) {' \
	'if false && !now.Before(l.restoreAt) {' \
	-- go test -count=1 -run 'Lowered' ./gitlab/

mutant "a blob read that failed for one project fails its waiters too" \
	scan/scan.go \
	'		if e.err == nil {
			return e.data, false, nil
		}' \
	'		return e.data, false, e.err' \
	-- go test -count=1 -run 'BlobRead' ./scan/

mutant "the recorder writes one event per transaction" \
	chain/recorder.go \
	'for len(batch) < maxRecordBatch {' \
	'for len(batch) < 1 {' \
	-- go test -count=1 -run 'TestRecorderGroups' ./chain/

mutant "the checkpointer leaves the WAL's restart to the next recording" \
	store/checkpoint.go \
	'_, err := c.wdb.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID))' \
	'_, err := fmt.Sprint(applicationID), error(nil)' \
	-- go test -count=1 -run 'TestCheckpointerStartsTheWALOver' ./store/

mutant "the statement cache is never used" \
	store/stmtcache.go \
	'if t.cache == nil {' \
	'if true {' \
	-- go test -count=1 -run 'TestStmtCache' ./store/

mutant "the outbox waits for a round of sends before sending a new action" \
	chain/outbox.go \
	'		s.close()
	}()
	for {' \
	'		s.close()
	}()
	for ; ; s.wg.Wait() {' \
	-- go test -count=1 -run 'TestRunOutboxSendsANewActionBesideASlowOne' ./chain/

mutant "a claim takes one action per transaction" \
	chain/outbox.go \
	'			t.handed[len(t.handed)-1].a = next' \
	'			t.handed[len(t.handed)-1].a = next
			return nil' \
	-- go test -count=1 -run 'TestOneClaimTakesActionsForEveryFreeSlot' ./chain/

mutant "a sender keeps its slot until its outcome is recorded" \
	chain/outbox.go \
	'		s.sendOne(a, chainID, free)' \
	'		s.sendOne(a, chainID, func() {})' \
	-- go test -count=1 -run 'TestNextCreateDoesNotWaitForTheRecording' ./chain/

mutant "NextEvent's read-ahead forgets the event marked, not the oldest" \
	store/events.go \
	't.cc.events = slices.DeleteFunc(t.cc.events, func(a aheadEvent) bool { return a.se.Seq == seq })' \
	't.cc.events = slices.Delete(t.cc.events, 0, 1)' \
	-- go test -count=1 -run 'TestNextEventUntilMarked' ./store/

mutant "a handed-over send that ends asks for a claim all the same" \
	chain/outbox.go \
	'			s.slotFreed()' \
	'			s.spawn()' \
	-- go test -count=1 -run 'TestHandedSendEndsWithoutAClaim' ./chain/

mutant "a claimer woken while every slot sends leaves what woke it for the next wake-up" \
	chain/outbox.go \
	'		if full || err != nil {' \
	'		if err != nil {' \
	-- go test -count=1 -run 'TestClaimerThatFoundEverySlotBusyLeavesTheClaimToTheNextSlot' ./chain/

mutant "each sender's outcome recorded in a transaction of its own" \
	chain/recordsent.go \
	'	if len(batch) > 1 {' \
	'	if len(batch) > 1 && false {' \
	-- go test -count=1 -run 'TestOutcomesAreRecordedTogether' ./chain/

mutant "PostgreSQL's held-back statements are not sent with the commit" \
	store/chains.go \
	'		return t.tx.pipe.commit(context.WithoutCancel(ctx))' \
	'		return nil' \
	-- go test -count=1 -run 'TestManyRowsWrittenTogether' ./store/

mutant "a scan leaves the processes' cached projects valid" \
	store/apply.go \
	"UPDATE generations SET n = n + 1 WHERE name = 'projects'" \
	"UPDATE generations SET n = n WHERE name = 'projects'" \
	-- go test -count=1 -run 'TestProjectLookUpsFollowScansOfAnyProcess' ./store/

mutant "reasons changed in place are not rewritten" \
	store/chains.go \
	'slices.EqualFunc(e.reasons, c.Reasons[:len(e.reasons)], sameReason)' \
	'slices.EqualFunc(e.reasons, e.reasons, sameReason)' \
	-- go test -count=1 -run 'TestReasonsStoredAsTheChainHasThem' ./store/

mutant "a live process under the same replica id taken for a dead earlier run" \
	daemon/alive.go \
	'case cur.Holder != seen.Holder || !cur.ExpiresAt.Equal(seen.ExpiresAt):' \
	'case false:' \
	-- go test -count=1 -run 'TestTwinIsRefused' ./daemon/

mutant "the earlier run of the same replica id dropped without waiting to see it renewed" \
	daemon/alive.go \
	'deadline := seen.ExpiresAt.Add(-l.margin())' \
	'deadline := now' \
	-- go test -count=1 -run 'TestRestartDropsTheDeadRunsLease|TestTwinIsRefused' ./daemon/

mutant "a liveness lease renewed at the moment it is dropped is dropped anyway" \
	store/replicas.go \
	'DELETE FROM leases WHERE name = $1 AND holder = $2 AND expires_at = $3`,
			l.Name, l.Holder, encodeTime(l.ExpiresAt))' \
	'DELETE FROM leases WHERE name = $1`, l.Name)' \
	-- go test -count=1 -run 'TestDropLeaseOnlyAsRead' ./store/

mutant "a queued action is never handed to the running outbox" \
	chain/txn.go \
	'handed := a.Kind != ActionValidate && t.out != nil && t.out.reserve()' \
	'handed := false && t.out.reserve()' \
	-- go test -count=1 -run 'TestQueuedActionIsHandedToTheRunningOutbox' ./chain/

mutant "a saved chain taken for one just inserted (its old members kept)" \
	store/chains.go \
	'fresh := version == 1' \
	'fresh := version >= 1' \
	-- go test -count=1 -run 'TestCatchUpAppliesAMissedSuccessOnce' ./chain/

mutant "RUN --mount values split on every comma, quoted ones included" \
	deps/containerfile.go \
	'fields, err := csvvalue.Fields(body, nil)' \
	'fields, err := strings.Split(body, ","), error(nil); _ = csvvalue.Fields' \
	-- go test -count=1 -run 'TestAnalyzeContainerfileTable|TestRunMountNotCSV' ./deps/

mutant "an expanded RUN --mount from= written back unquoted" \
	deps/containerfile.go \
	'flags[i] = "--mount=" + csvRecord(fields)' \
	'flags[i] = "--mount=" + strings.Join(fields, ",")' \
	-- go test -count=1 -run 'TestAnalyzeContainerfileTable' ./deps/

mutant "an action handed to the outbox sent for the chain merged away" \
	chain/txn.go \
	'			h.chainID = chainID' \
	'			_ = chainID' \
	-- go test -count=1 -run 'TestHandedActionIsSentForTheChainThatAbsorbedItsOwn' ./chain/

mutant "a merge never withdraws an action its own transaction handed to the outbox" \
	chain/start.go \
	'(a.Attempts > 0 && !t.handedHere(a.ID))' \
	'a.Attempts > 0' \
	-- go test -count=1 -run 'TestHandedActionWithdrawnInTheSameTransactionIsGivenBack' ./chain/

mutant "a handed action given back as it was written, not as the store holds it" \
	chain/txn.go \
	'a, ok, err := t.tx.Action(t.ctx, h.a.ID)' \
	'a, ok, err := h.a, true, error(nil)' \
	-- go test -count=1 -run 'TestHandedActionWithdrawnInTheSameTransactionIsGivenBack' ./chain/

mutant "PostgreSQL's BEGIN of a write does not take the write lock: replicas' writers interleave" \
	store/pgconn.go \
	'SELECT pg_advisory_xact_lock(' \
	'SELECT abs(' \
	-- go test -count=1 -run 'TestWriteTransactionsSerialise' ./store/

mutant "a pipelined transaction's COMMIT is sent twice: a round trip more for every writer in line" \
	store/pgconn.go \
	"if t.conn.PgConn().TxStatus() == 'I' {" \
	"if false {" \
	-- go test -count=1 -run 'TestWriteRoundTrips' ./store/

mutant "every new chain id is a query of its own, not brought along with the active chains" \
	store/chains.go \
	'if t.cc == nil || t.cc.nextID == 0 {' \
	'if true {' \
	-- go test -count=1 -run 'TestWriteRoundTrips' ./store/

mutant "two chains started in one transaction get the same id" \
	store/chains.go \
	'	t.cc.nextID++' \
	'' \
	-- go test -count=1 -run 'TestNewChainIDs' ./store/

mutant "a repeated success of a pipeline that counted for a member counts again" \
	store/outbox.go \
	'WHERE pipeline_id = $1 AND state IN ($2, $3, $4)),' \
	'WHERE pipeline_id = $1 AND state IN ($2, $3, $4) AND false),' \
	-- go test -count=1 -run 'TestPipelineSeen' ./store/

mutant "an event naming its action never looks up what its pipeline started: a first-level success delivered twice triggers twice" \
	chain/apply.go \
	'	seenAll := actionID == ""' \
	'	seenAll := true' \
	-- go test -count=1 -run 'TestFirstLevelOwnSuccessDeliveredTwiceTriggersOnce' ./chain/

mutant "a withdrawn action counts as a build of its member" \
	chain/start.go \
	'	m.Builds-- // the action built nothing' \
	'' \
	-- go test -count=1 -run 'TestOverlappingChainsMerge' ./chain/

mutant "a quiet webhook event is never applied as it is recorded" \
	chain/recorder.go \
	'quiet := r.e.now().Sub(r.lastWrite) >= quietGap' \
	'quiet := false' \
	-- go test -count=1 -run 'TestRecorderAppliesAQuietEventAtOnce|TestRecorderAppliesOlderEventsFirst' ./chain/

mutant "a quiet event whose transaction fails is not recorded (its webhook gets a 503)" \
	chain/recorder.go \
	'		r.e.log.Warn("applying webhook events as they are recorded failed; recording them for the inbox", "err", err)' \
	'		r.answer(batch, nil, err); return' \
	-- go test -count=1 -run 'TestRecorderRecordsForTheInboxWhenApplyingFails' ./chain/

mutant "events that waited together are applied before their acknowledgement" \
	chain/recorder.go \
	'if quiet && len(batch) == 1 && pipelines' \
	'if quiet && pipelines' \
	-- go test -count=1 -run 'TestRecorderOnlyRecordsEventsThatWaitedTogether' ./chain/

mutant "the events recorded in a write transaction come before older ones that did not fit the read-ahead (PostgreSQL)" \
	store/events.go \
	'	if len(older) == n {' \
	'	if false {' \
	-- go test -count=1 -run 'TestRecordEventsThenApplyInOneTransaction' ./store/

mutant "the active chains' versions read with the BEGIN are never used (PostgreSQL: one more round trip under the write lock)" \
	store/pgconn.go \
	'	ra.ok = err == nil' \
	'	ra.ok = false' \
	-- go test -count=1 -run 'TestWriteRoundTrips' ./store/

mutant "an event close behind another is applied before its acknowledgement (no lull needed)" \
	chain/recorder.go \
	'quiet := r.e.now().Sub(r.lastWrite) >= quietGap' \
	'quiet := r.e.now().Sub(r.lastWrite) >= 0' \
	-- go test -count=1 -run 'TestRecorderOnlyRecordsAnEventThatFollowsClosely' ./chain/

mutant "the recorder's quiet path does not announce its recording (PostgreSQL: it no longer goes with the BEGIN)" \
	chain/recorder.go \
	'err = e.update(RecordingFirst(ctx, evs), g,' \
	'err = e.update(ctx, g,' \
	-- go test -count=1 -run 'TestRecorderAnnouncesWhatItRecordsFirst' ./chain/

mutant "an announced recording is not sent with the BEGIN (PostgreSQL: two more round trips under the write lock)" \
	store/chains.go \
	'recorded, ra.then = a, a.statements()' \
	'recorded = a' \
	-- go test -count=1 -run 'TestWriteRoundTrips' ./store/

mutant "the look-up sent with a recording answers after an older event changed it (a stale answer)" \
	store/recordahead.go \
	'	if len(a.events) == 1 && a.events[0].se.Key == a.rec.keys[0] {' \
	'	if true {' \
	-- go test -count=1 -run 'TestRecordingFirstLooksUpAfterOlderEvents|TestActionLookedUpWithItsEventsRecording' ./store/

mutant "an event's action is never taken from the look-up sent with its recording (PostgreSQL: one more round trip)" \
	store/recordahead.go \
	'	if l == nil || l.actionID == "" || l.actionID != id {' \
	'	if true {' \
	-- go test -count=1 -run 'TestWriteRoundTrips' ./store/

mutant "a slot freed before its claimer noted the claim ran out of slots asks for no claim (an action waits for the poll)" \
	chain/outbox.go \
	'		s.mayBeDue = true
		return false' \
	'		return false' \
	-- go test -count=1 -run 'TestSlotFreedBeforeTheClaimerSawItsClaimFull' ./chain/

mutant "podman-executor loses the script's exit code (the real runner reports 1, not 3)" \
	podman-executor/executor/job.go \
	'File: env["BUILD_EXIT_CODE_FILE"]' \
	'File: env["BUILD_EXIT_CODE_FILE_UNSET"]' \
	-- sh -c 'cd podman-executor && CGO_ENABLED=0 go test -count=1 -tags "remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp" -run "TestRealRunnerJobOutcome/failing" ./integration/'

mutant "the real GitLab Runner missing in CI is skipped" \
	podman-executor/integration/runner_harness_test.go \
	'path := os.Getenv("DEPSD_GITLAB_RUNNER")' \
	'path := os.Getenv("DEPSD_GITLAB_RUNNER_UNSET")' \
	-- sh -c 'cd podman-executor && CI=true CGO_ENABLED=0 go test -count=1 -tags "remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp" -run "TestRealRunnerJobOutcome/success" ./integration/'

mutant "a project's refusal of variables is not remembered (every send pays it again)" \
	chain/outbox.go \
	'if err := e.learnIdent(ctx, a.ProjectID, next); err != nil {' \
	'if err := error(nil); err != nil {' \
	-- go test -count=1 -run 'TestChainThroughProjectRefusingVariables' ./chain/

mutant "variables refused taken as a permanent failure" \
	gitlab/errors.go \
	'		e.kind = ErrVariablesRefused' \
	'' \
	-- go test -count=1 -run 'TestCreateRefusals|TestChainThroughProjectRefusingVariables' ./gitlab/ ./chain/

mutant "a scan does not re-check a project that refused variables when it changes" \
	scan/ciconfig.go \
	'return policy == gitlab.VariablesRefused || prev == IdentInputs || prev == IdentNone' \
	'return policy == gitlab.VariablesRefused' \
	-- go test -count=1 -run 'TestScanLearnsPipelineIdent' ./scan/

mutant "a resend without action id adopts another user's api pipeline" \
	chain/outbox.go \
	'Username: user.Username, CreatedAfter' \
	'Username: user.Username[:0], CreatedAfter' \
	-- go test -count=1 -run 'TestResendAdoptsWithoutActionID' ./chain/

mutant "a resend without action id ignores the input in the pipeline's name" \
	chain/outbox.go \
	'if strings.Contains(p.Name, a.ID) {' \
	'if false && strings.Contains(p.Name, a.ID) {' \
	-- go test -count=1 -run 'TestResendAdoptsWithoutActionID' ./chain/

mutant "an unrecorded api success in a project without action ids starts a chain before the resend adopts it" \
	chain/apply.go \
	'if !ours && ev.Source == "api" && classify' \
	'if false && !ours && ev.Source == "api" && classify' \
	-- go test -count=1 -run 'TestUnrecordedSuccessWaitsForTheResend' ./chain/

mutant "a learned pipeline ident stays hidden behind other processes' project caches" \
	store/chains.go \
	"UPDATE generations SET n = n + 1 WHERE name = 'projects'\`); err != nil {
		return fmt.Errorf(\"set pipeline ident" \
	"SELECT 1\`); err != nil {
		return fmt.Errorf(\"set pipeline ident" \
	-- go test -count=1 -run 'TestPipelineIdentStored' ./store/

mutant "a resend in a project without variables never adopts (kill -9 between create and record duplicates)" \
	chain/outbox.go \
	'		return e.findSentWithoutID(ctx, a)' \
	'		return gitlab.Pipeline{}, false, nil' \
	-- go test -count=1 -run 'TestResendAdoptsWithoutActionID' ./chain/
mutant "the fake's complexity ignores GitLab's 1 % a page item (a query GitLab refuses passes the fake)" \
	gitlab/gitlabtest/graphql_complexity.go \
	'		c += c * float64(limit) * 0.01' \
	'		c += 0' \
	-- go test -count=1 -run 'TestGraphQLComplexity' ./gitlab/gitlabtest/

mutant "a blob GraphQL gave no text of (binary) is taken as read, its content lost" \
	scan/batch.go \
	'	if blob.Complete {' \
	'	if true || blob.Complete {' \
	-- go test -count=1 -run 'TestGraphQLScanCostsAndEqualsREST' ./scan/

mutant "an old GitLab without Repository.blobs is asked again for every batch" \
	scan/batch.go \
	'	case giveUp && errors.Is(err, gitlab.ErrGraphQLUnsupported):' \
	'	case false:' \
	-- go test -count=1 -run 'TestGraphQLScanFallsBack/old' ./scan/

mutant "a query GitLab finds too complex is not asked in parts (every batch read through REST)" \
	gitlab/graphqlrefs.go \
	'		case errors.Is(err, errTooComplex) && n > 1:' \
	'		case false && n > 1:' \
	-- go test -count=1 -run 'TestGraphQLScanFallsBack/too' ./scan/

mutant "the instance scope lists with offset pages, refused past GitLab's offset limit" \
	gitlab/projects.go \
	'Pagination: "keyset", ' \
	'Pagination: "", ' \
	-- go test -count=1 -short -run 'TestInstanceScopeListsPastTheOffsetLimit' ./gitlab/
mutant "a wrong webhook signature falls back to X-Gitlab-Token in auto mode" \
	webhook/handler.go \
	'		if err != nil {
			h.refuse(w, r, kind, eventType, err.Error())' \
	'		if err != nil && h.unsignedRefusal(r) != "" {
			h.refuse(w, r, kind, eventType, err.Error())' \
	-- go test -count=1 -run 'TestHandlerSigningModes' ./webhook/

mutant "a signed delivery of any age is accepted (no replay window)" \
	webhook/signature.go \
	'		return ErrTimestamp
	}' \
	'	}' \
	-- go test -count=1 -run 'TestVerify$|TestHandlerSigningModes' ./webhook/

mutant "hooks sync edits every hook again on a GitLab that ignores signing tokens" \
	gitlab/hooksync.go \
	'!*h.SigningTokenPresent && !signingIgnored {' \
	'!*h.SigningTokenPresent {' \
	-- go test -count=1 -run 'TestSyncHooksSigningToken' ./gitlab/

mutant "group mode removes project hooks although the group hook did not answer its test delivery" \
	gitlab/grouphooksync.go \
	'	if !ok {
		// Both hooks deliver meanwhile' \
	'	if false && !ok {
		// Both hooks deliver meanwhile' \
	-- go test -count=1 -run 'TestSyncGroupHooksFallBack' ./gitlab/
mutant "verification caches nothing (an upstream read again for each downstream)" \
	verify/verifier.go \
	'			v.cache.add(key, x)' \
	'' \
	-- go test -count=1 -run 'TestVerifyRequestCount' ./verify/

mutant "an earlier image of an upstream is never read for its layers (stale by layers becomes unknown)" \
	verify/verifier.go \
	'verdict.State != StateUnknown || len(earlier) == 0' \
	'true' \
	-- go test -count=1 -run 'TestVerifyAgainstRegistry' ./verify/

mutant "the shortest earlier layer prefix is taken for the base" \
	verify/decide.go \
	'len(e.DiffIDs) > len(best.DiffIDs)' \
	'len(e.DiffIDs) < len(best.DiffIDs)' \
	-- go test -count=1 -run 'TestDecide' ./verify/

mutant "a member still stale after its rebuild without cache is rebuilt again (and again)" \
	chain/verify.go \
	'	case !m.NoCache:' \
	'	case true:' \
	-- go test -count=1 -run 'TestStaleTwiceBlocksDescendantsWithTheDigests' ./chain/

mutant "a verification reads the image and its upstream's current image one after the other (two chains of reads on the critical path)" \
	verify/verifier.go \
	'	img, err := v.read(ctx, req.Image, req.Platform)
	wg.Wait()' \
	'	wg.Wait()
	img, err := v.read(ctx, req.Image, req.Platform)' \
	-- go test -count=1 -run 'TestVerifyReadsUpstreamWhileImage' ./verify/

mutant "a verification queued by another replica is not looked for while others are in flight (found only when one ends)" \
	chain/verify.go \
	'		case <-poll.C:' \
	'		case <-make(chan time.Time):' \
	-- go test -count=1 -run 'TestSlowVerificationHoldsBackOnlyItsOwn' ./chain/

mutant "a verification queued while another waits for a slow registry waits for it (the critical path behind an unrelated image)" \
	chain/verify.go \
	'case <-e.verifyC: // queued meanwhile: read the queue again' \
	'case <-make(chan struct{}):' \
	-- go test -count=1 -run 'TestSlowVerificationHoldsBackOnlyItsOwn' ./chain/

mutant "a member verifying its images counts as finished (the chain ends before the verdict)" \
	chain/chain.go \
	'return s == Waiting || s == WaitingMerge || s == Verifying || s.Building()' \
	'return s == Waiting || s == WaitingMerge || s.Building()' \
	-- go test -count=1 -run 'TestVerifyingMemberKeepsTheChainRunning' ./chain/

mutant "a success seen again while its member verifies starts a chain (resets the member)" \
	store/outbox.go \
	'state IN ($2, $3, $4)' \
	'state IN ($2, $2, $2) AND $3 <> $4' \
	-- go test -count=1 -run 'TestStaleTwiceBlocksDescendantsWithTheDigests' ./chain/

mutant "the reconciler takes a stale member's own successful pipeline for the success that unblocks it" \
	chain/reconcile.go \
	'if failedID != 0 && retried {' \
	'if failedID != 0 {' \
	-- go test -count=1 -run 'TestReconcilerUnblocksAStaleMember' ./chain/

mutant "an upstream's current image taken from the digests recorded, not the registry (a base outside the scope that moved is missed)" \
	verify/check.go \
	'		for _, s := range history {
			up.Earlier = append(up.Earlier, s.Digest)
		}' \
	'		for i, s := range history {
			if i == 0 {
				up.Current = s.Digest
			} else {
				up.Earlier = append(up.Earlier, s.Digest)
			}
		}' \
	-- go test -count=1 -run 'TestExternalBaseMovedIsReadFromTheRegistry' ./daemon/

mutant "depsd serve records no digest it reads (an image built on an earlier upstream is unknown, never stale)" \
	verify/check.go \
	'			errs = append(errs, c.Store.RecordUpstreamDigest(ctx, image, digest, at))' \
	'			_ = image' \
	-- go test -count=1 -run 'TestStaleImageRebuiltWithoutCacheAgainstTheRegistry' ./daemon/

mutant "a simulated pipeline told to build on an earlier base builds on the current one" \
	gitlab/gitlabtest/images.go \
	'		if plan.From != "" {' \
	'		if false {' \
	-- go test -count=1 -run 'TestPipelinesPublishImages' ./gitlab/gitlabtest/

mutant "a registry's refusal keeps the refused credentials for the process's life" \
	registry/read.go \
	'			c.newPuller()
' \
	'' \
	-- go test -count=1 -run 'TestManifestAfterRotatedCredentials' ./registry/

mutant "the first credential file that exists wins, even without the registry (go-containerregistry's default)" \
	registry/keychain.go \
	'if err != nil || found {' \
	'if err == nil || found {' \
	-- go test -count=1 -run 'TestDefaultCredentialFiles' ./registry/

mutant "an image is stale since its upstream's current digest appeared, not since it moved away from the image's base" \
	verify/freshness.go \
	'			return history[i-1].FirstSeen' \
	'			return history[0].FirstSeen' \
	-- go test -count=1 -run 'TestFreshness' ./verify/

mutant "a stale image's fix ignores the schedules of the projects it is built from (only its own)" \
	verify/freshness.go \
	'		if upstreams == nil {
			continue
		}' \
	'		if true {
			continue
		}' \
	-- go test -count=1 -run 'TestFixes' ./verify/

mutant "the chain page shows a member a verdict made before its build in that chain" \
	dashboard/freshness.go \
	'if !ok || r.VerifiedAt.Before(t) {' \
	'if !ok || r.VerifiedAt.Before(t) && false {' \
	-- go test -count=1 -run 'TestFreshnessPages' ./dashboard/

mutant "GET /api/v1/freshness ignores max_age (stale_beyond_max_age always counts past 24h)" \
	daemon/http.go \
	'		q.MaxAge = d' \
	'		_ = d' \
	-- go test -count=1 -run 'TestFreshnessAPI' ./daemon/

mutant "a check records no digest it reads (its downstreams are never found stale)" \
	verify/check.go \
	'		if digest != "" {' \
	'		if false {' \
	-- go test -count=1 -run 'TestCheckRecordsAndJudgesAgainstHistory' ./verify/

mutant "concurrent verifications each read the shared upstream (no single flight)" \
	verify/verifier.go \
	'	x, err, _ := v.flight.Do(key, func() (any, error) {
		x, err := read()
		if err == nil {
			v.cache.add(key, x)
		}
		return x, err
	})' \
	'	x, err := read()
	if err == nil {
		v.cache.add(key, x)
	}' \
	-- go test -count=1 -run 'TestConcurrentVerificationsShareUpstreamReads' ./verify/
mutant "the blocked-chain age follows the newest blocked chain, not the oldest (the alert comes late)" \
	chain/view.go \
	'c.UpdatedAt.Before(s.BlockedSince)' \
	'c.UpdatedAt.After(s.BlockedSince)' \
	-- go test -count=1 -run 'TestStatsSayHowLongTheOldestBlockedChainWaits' ./chain/

mutant "the blocked-chain alert waits twice its documented hour" \
	packaging/prometheus/depsd-alerts.yml \
	'depsd:threshold:chain_blocked_seconds) or vector(3600)' \
	'depsd:threshold:chain_blocked_seconds) or vector(7200)' \
	-- env CI=true go test -count=1 -run 'TestPromtoolChecksTheRules' ./packaging/prometheus/

mutant "a store that stops answering still reads as up" \
	daemon/metrics.go \
	'm.storeUp.Set(boolGauge(ok))' \
	'm.storeUp.Set(1)' \
	-- go test -count=1 -run 'TestStoreDownIsExported' ./daemon/

mutant "the Debian mirror taken from a bookworm-security line" \
	.ci/debian-mirror.sh \
	'if ($(i + 1) == suite)' \
	'if (index($(i + 1), suite) == 1)' \
	-- go test -count=1 -run 'TestDebianMirrorFromAptSources' ./internal/ciscripts/

mutant "a hook the maintenance run re-enabled still counts as disabled (the alert fires for 6 hours after the repair)" \
	daemon/metrics.go \
	'(c.Action == gitlab.HookCreated || c.Action == gitlab.HookReenabled)' \
	'(c.Action == gitlab.HookCreated)' \
	-- go test -count=1 -run 'TestStateMetricsSayWhatTheAlertsWatch' ./daemon/
# podman-executor is its own module, built with its podman tags.
pe_test() {
	(cd podman-executor && CGO_ENABLED=0 go test -count=1 \
		-tags "remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp" "$@")
}

mutant "podman-executor: a service's warning says the deadline cut the last check short, not what was missing" \
	podman-executor/executor/services_wait.go \
	'		if missing == nil || ctx.Err() == nil {' \
	'		if true {' \
	-- pe_test -run 'TestServiceWarningSaysWhatWasMissing' ./executor/

mutant "podman-executor: services get the job container's options (devices, capabilities, sysctls) instead of the docker executor's subset" \
	podman-executor/executor/stage_prepare.go \
	'Options:    e.Config.serviceOptions(),' \
	'Options:    e.Config.jobOptions(),' \
	-- pe_test -run 'TestPrepareAppliesOptions' ./executor/

mutant "podman-executor: privileged = true ignores allowed_privileged_images / _services" \
	podman-executor/executor/build.go \
	'return c.Privileged && allowed(image, list)' \
	'return c.Privileged' \
	-- pe_test -run 'TestPrepareAppliesOptions' ./executor/

mutant "podman-executor: a ulimit without nofile/nproc lets podman 4.3 raise them past the host's hard limit (the job container does not start)" \
	podman-executor/container/options.go \
	'	if len(p.Rlimits) > 0 {' \
	'	if false {' \
	-- pe_test -run 'TestUlimitKeepsTheOtherLimits' ./container/

mutant "podman-executor: gc never removes unused build storage volumes" \
	podman-executor/executor/stage_gc.go \
	'{roleBuilds, "builds volume"}, {roleBuildStorage, "build storage volume"}' \
	'{roleBuilds, "builds volume"}' \
	-- pe_test -run 'TestGCBuildStorage' ./executor/

mutant "podman-executor: a per-project build job on rootless podman asks for an ID range the user does not have (the job container cannot be created)" \
	podman-executor/executor/build.go \
	'		if !rootless {' \
	'		if true {' \
	-- pe_test -run 'TestBuildProfileOnRootlessPodman' ./executor/

mutant "podman-executor: a build job's helper container (helper_image) runs as the host's root, outside the job's user namespace (the job cannot write to its checkout)" \
	podman-executor/executor/stage_prepare.go \
	'	s.Options = s.Options.Merge(userNS)' \
	'	_ = userNS' \
	-- pe_test -run 'TestBuildJobHelperInItsUserNamespace' ./executor/

mutant "podman-executor: a build job in its own user namespace shares the kept builds volume (a checkout the other jobs left as the host's root)" \
	podman-executor/executor/stage_prepare.go \
	'name = id.BuildJobBuildsVolumeName()' \
	'name = id.BuildsVolumeName()' \
	-- pe_test -run 'TestBuildJobHelperInItsUserNamespace' ./executor/

mutant "podman-executor: a build job in its own user namespace gets the project's cache as the host's root left it (it cannot write the cache)" \
	podman-executor/executor/stage_prepare.go \
	'			out[i].Chown = true' \
	'			out[i].Chown = false' \
	-- pe_test -run 'TestBuildJobHelperInItsUserNamespace' ./executor/

mutant "podman-executor: a chowned mount reaches podman without its U option (the build job's cache stays the host root's)" \
	podman-executor/container/podman_containers.go \
	'		if m.Chown {' \
	'		if false && m.Chown {' \
	-- env CI=true sh -c 'cd podman-executor && CGO_ENABLED=0 go test -count=1 -tags "remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp" -run "TestRealRunnerBuildJobWithHelperImage/kept" ./integration/'

mutant "a project declaring depsd_action_id but not depsd_no_cache is taught to take no input (a no-cache rebuild downgrades it)" \
	chain/outbox.go \
	'case errors.Is(err, gitlab.ErrInputsRefused) && a.Ident == IdentInputs && a.NoCache && !noCacheRefused:' \
	'case false && a.NoCache && !noCacheRefused:' \
	-- go test -count=1 -run 'TestNoCacheInputWhereDeclared' ./chain/
mutant "podman-executor: a job container that stops right after start is taken for running (prepare succeeds, the first stage hangs)" \
	podman-executor/executor/stage_prepare.go \
	'return fmt.Errorf("container %s stopped right after start", name)' \
	'return nil' \
	-- pe_test -run 'TestPrepare/container_that_exits_at_once$' ./executor/
mutant "demo: depsd demo --real does not look for podman-executor beside depsd (make build's bin/ is then reported missing)" \
	demo/real.go \
	'} else if self, err := env.executable(); err == nil && env.stat(' \
	'} else if self, err := env.executable(); err != nil && env.stat(' \
	-- go test -count=1 -run 'TestRealDemoPrerequisites' ./demo/

mutant "dashboard: a base's focus view of a large instance draws every downstream (seconds in the browser)" \
	dashboard/pages.go \
	'if q.Get("depth") == "" && len(doc.Projects) > maxFocusPicture {' \
	'if false {' \
	-- go test -count=1 -run 'TestGraphPageAtScale' ./dashboard/

mutant "dashboard: the graph page of a large instance carries every project in its search list" \
	dashboard/pages.go \
	'if len(data.doc.Projects) > inlineSearch {' \
	'if false {' \
	-- go test -count=1 -run 'TestGraphPageAtScale' ./dashboard/

mutant "the daemon's scope after a scan misses the stored projects' ids (webhooks refused)" \
	store/graph.go \
	'			ids[id] = true' \
	'' \
	-- go test -count=1 -run 'TestGraph$' ./store/

mutant "verification judges an image against every stage's FROM, not the built stage's (the scan's built stage bases not stored: a COPY --from image taken for a base, unknown)" \
	store/apply.go \
	'built, err := encodeNames(p.Built)' \
	'built, err := encodeNames(nil)' \
	-- go test -count=1 -run 'TestMultiStageImageJudgedAgainstItsBuiltStage$' ./daemon/

mutant "a rescan that changes only a project's built stage bases leaves the stored ones" \
	store/apply.go \
	' && slices.Equal(a.Built, b.Built) &&' \
	' &&' \
	-- go test -count=1 -run 'TestVerifyProjects$/sqlite' ./store/

mutant "a freshness page cursor forgets how long its row has been stale (the next page of stale images starts over, or skips some)" \
	verify/page.go \
	'cursor{State: r.State, StaleSince: r.StaleSince, Project' \
	'cursor{State: r.State, Project' \
	-- go test -count=1 -run 'TestPaginate' ./verify/

mutant "GET /api/v1/freshness counts stale_beyond_max_age over the page answered, not every page (a monitor misses the stale images on later pages)" \
	daemon/freshness.go \
	'over = verify.Overdue(rows, q.MaxAge, now())' \
	'over = verify.Overdue(page.Rows, q.MaxAge, now())' \
	-- go test -count=1 -run 'TestFreshnessAPIPages' ./daemon/

mutant "depsd freshness prints one page of rows, not every row (a cron job misses the rest)" \
	cmd/depsd/freshness.go \
	'MaxAge: maxAge})' \
	'MaxAge: maxAge, Limit: verify.MaxPageLimit})' \
	-- go test -count=1 -run 'TestFreshnessCommandPrintsEveryRow' ./cmd/depsd/

mutant "a verification queued by a follower does not wake the leader (verified at its next poll, 5 s later on the chain's critical path)" \
	store/verify.go \
	"err = t.tx.execLater(ctx, \`SELECT pg_notify(\$1, '')\`, verifyChannel)" \
	'err = nil' \
	-- go test -count=1 -run 'TestWatchVerifyQueue/postgres' ./store/

mutant "the leader does not listen for verifications other replicas queue (each waits for its next poll of the queue)" \
	daemon/lead.go \
	'g.Go(func() error { d.watchVerifyQueue(gctx); return nil })' \
	'' \
	-- go test -count=1 -run 'TestVerificationQueuedByAnotherReplicaWakesTheLeader' ./daemon/

# Issue 38: an image built on a base its Containerfile pins by digest.
mutant "a pinned base is judged against its pin (the false fresh of issue 38)" \
	verify/publish.go \
	'current := unpinned(img, upstreamProject(p, ref), named)' \
	'current := ref' \
	-- go test -count=1 -run 'TestPinnedUpstreamIsNeverJudgedFresh' ./daemon/

mutant "an image built on its pin is stale (rebuilt without cache, blocking)" \
	verify/verifier.go \
	'		v.State = StatePinned' \
	'' \
	-- go test -count=1 -run 'TestPinnedUpstreamIsNeverJudgedFresh' ./daemon/
# Issue 41 items 5-6 and issue 42 items 1, 2, 4, 5, 7, 8 (audit-tests).

mutant "a pipeline of project x carrying y's action id is taken for y's build (41.5)" \
	chain/apply.go \
	'if err == nil && seen.HasAction && !sameProject(seen.Action, ev) {' \
	'if false && err == nil && seen.HasAction && !sameProject(seen.Action, ev) {' \
	-- go test -count=1 -run 'TestActionIDFromAnotherProjectIsNotOurs' ./chain/

mutant "a resend with variables adopts another user's api pipeline carrying the action id (41.6)" \
	chain/outbox.go \
	'Ref: a.Ref, Source: "api", Username: user.Username, UpdatedAfter: since, Limit: 50,' \
	'Ref: a.Ref, Source: "api", Username: user.Username[:0], UpdatedAfter: since, Limit: 50,' \
	-- go test -count=1 -run 'TestResendAdoptsOnlyTheTokensPipeline' ./chain/

mutant "a resend without action id adopts the token's pipeline another action recorded (42.1)" \
	chain/outbox.go \
	'if (seen.HasAction && seen.Action.ID != a.ID) || seen.Counted || seen.Started {' \
	'if seen.Counted || seen.Started {' \
	-- go test -count=1 -run 'TestResendAdoptsWithoutActionID' ./chain/

mutant "a resend without action id adopts the token's pipeline a member counted or a chain started with (42.1)" \
	chain/outbox.go \
	'if (seen.HasAction && seen.Action.ID != a.ID) || seen.Counted || seen.Started {' \
	'if seen.HasAction && seen.Action.ID != a.ID {' \
	-- go test -count=1 -run 'TestResendAdoptsWithoutActionID' ./chain/

mutant "a resend without action id adopts the newest free candidate (the other lost create's: app built a third time) (42.1)" \
	chain/outbox.go \
	'if p.ID < oldest.ID {' \
	'if p.ID > oldest.ID {' \
	-- go test -count=1 -run 'TestResendsOfTwoActionsAdoptTheirOwn' ./chain/

mutant "a resend without action id trusts created_after (a GitLab that ignores it: the token's older pipeline adopted) (42.2)" \
	chain/outbox.go \
	'
			if !p.CreatedAt.IsZero() && p.CreatedAt.Before(since) {' \
	'
			if false {' \
	-- go test -count=1 -run 'TestResendAdoptsWithoutActionID' ./chain/

mutant "a resend with variables reads the variables of pipelines from before the action (42.2)" \
	chain/outbox.go \
	'
		if !p.CreatedAt.IsZero() && p.CreatedAt.Before(since) {' \
	'
		if false {' \
	-- go test -count=1 -run 'TestResendSkipsPipelinesFromBeforeTheAction' ./chain/

mutant "depsd_no_cache sent as \"1\", which GitLab refuses for a boolean input (42.4)" \
	chain/action.go \
	'inputs[InputNoCache] = "true"' \
	'inputs[InputNoCache] = "1"' \
	-- go test -count=1 -run 'TestNoCacheInputWhereDeclared' ./chain/

mutant "the fake GitLab accepts an input value of another type than declared (42.4)" \
	gitlab/gitlabtest/cisettings.go \
	'case ok && !ofInputType(in.typ, v):' \
	'case false && !ofInputType(in.typ, v):' \
	-- go test -count=1 -run 'TestPipelineInputs' ./gitlab/gitlabtest/

mutant "a signed delivery is keyed by its unsigned Idempotency-Key (a replay with a new key is applied again) (42.5)" \
	webhook/handler.go \
	'	if k := r.Header.Get(HeaderWebhookID); k != "" {
		return k
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return k
	}' \
	'	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return k
	}
	if k := r.Header.Get(HeaderWebhookID); k != "" {
		return k
	}' \
	-- go test -count=1 -run 'TestHandlerDedupesOnWebhookID' ./webhook/

mutant "a signed delivery exactly 5 minutes old is refused (42.5)" \
	webhook/signature.go \
	'd > int64(MaxClockSkew/time.Second)' \
	'd >= int64(MaxClockSkew/time.Second)' \
	-- go test -count=1 -run 'TestVerify$' ./webhook/

mutant "a signed delivery stamped exactly 5 minutes ahead is refused (42.5)" \
	webhook/signature.go \
	'd < -int64(MaxClockSkew/time.Second)' \
	'd <= -int64(MaxClockSkew/time.Second)' \
	-- go test -count=1 -run 'TestVerify$' ./webhook/

mutant "a GraphQL read at a default branch other than the listed one is taken (another branch's dependencies recorded) (42.7)" \
	scan/batch.go \
	'case !ok || pb.Err != nil || (pb.RootRef != "" && pb.RootRef != lp.DefaultBranch):' \
	'case !ok || pb.Err != nil:' \
	-- go test -count=1 -run 'TestGraphQLScanReadsTheListedBranch' ./scan/

mutant "hooks sync plans every project in parallel before it knows whether GitLab keeps signing tokens (hooks edited for nothing, depending on timing) (42.8)" \
	gitlab/hooksync.go \
	'for len(rest) > 0 && spec.SigningToken != "" && !dryRun && !c.signingKnown.Load() {' \
	'for false && len(rest) > 0 && spec.SigningToken != "" && !dryRun && !c.signingKnown.Load() {' \
	-- go test -count=3 -run 'TestSyncHooksSigningToken$' ./gitlab/

# Issues 37 and 39: the fake GitLab's commit statuses, users and OAuth;
# the client's status errors.
mutant "gitlabtest: a commit status does not count in its pipeline's status (no second Pipeline Hook on an upstream's finished pipeline)" \
	gitlab/gitlabtest/statuses.go \
	'	st.own[pl.id] = status
	return st.composite(pl)' \
	'	st.own[pl.id] = status
	return status' \
	-- go test -count=1 -run 'TestCommitStatusRecomputesPipeline|TestSetCommitStatus' ./gitlab/gitlabtest/ ./gitlab/

mutant "gitlabtest: a status after a final one updates it instead of starting a new one (400 where GitLab answers 201)" \
	gitlab/gitlabtest/statuses.go \
	'(old.status == "pending" || old.status == "running")' \
	'true' \
	-- go test -count=1 -run 'TestCommitStatusTransitions' ./gitlab/gitlabtest/

mutant "gitlabtest: a running status accepts running again (GitLab answers 400 Cannot transition status via :run from :running)" \
	gitlab/gitlabtest/statuses.go \
	'		if from != "pending" {
			return transitionError("run", from)' \
	'		if from == "never" {
			return transitionError("run", from)' \
	-- go test -count=1 -run 'TestCommitStatusTransitions|TestSetCommitStatus' ./gitlab/gitlabtest/ ./gitlab/

mutant "gitlab: an invalid status transition is not ErrStatusTransition" \
	gitlab/errors.go \
	'e.Status == http.StatusBadRequest && strings.Contains(e.Message, "Cannot transition status via")' \
	'false' \
	-- go test -count=1 -run 'TestSetCommitStatus' ./gitlab/

mutant "gitlabtest: a private project is readable by everyone" \
	gitlab/gitlabtest/users.go \
	'if c.admin || s.visibilityOf(p) != VisibilityPrivate {' \
	'if true {' \
	-- go test -count=1 -run 'TestUsersSeeTheirProjects|TestClientForAPerson' ./gitlab/gitlabtest/ ./gitlab/

mutant "gitlabtest: a project shared with a group gives its members their full group role, not at most Developer" \
	gitlab/gitlabtest/users.go \
	'take(a.groupMembers[g.id][uid], sharedAccess)' \
	'take(a.groupMembers[g.id][uid], AccessOwner)' \
	-- go test -count=1 -run 'TestMembersAll' ./gitlab/gitlabtest/

mutant "gitlabtest: a read_api token may write" \
	gitlab/gitlabtest/users.go \
	'if get && slices.Contains(c.scopes, "read_api") {' \
	'if slices.Contains(c.scopes, "read_api") {' \
	-- go test -count=1 -run 'TestRolesAndScopes|TestOAuthRoundTrip|TestClientForAPerson' ./gitlab/gitlabtest/ ./gitlab/

mutant "gitlabtest: /oauth/token does not check the PKCE code_verifier" \
	gitlab/gitlabtest/oauth.go \
	'subtle.ConstantTimeCompare([]byte(pkceS256(verifier)), []byte(code.challenge)) != 1' \
	'false' \
	-- go test -count=1 -run 'TestOAuthRoundTrip' ./gitlab/gitlabtest/
# podman-executor security (issue 41 items 1-3), its CI skip (issue 42
# item 3) and cleanup's retry (issue 39).
pe_ci() {
	(cd podman-executor && CI=true CGO_ENABLED=0 go test -count=1 \
		-tags "remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp" "$@")
}

mutant "podman-executor: the driver writes a stage's script through a link planted under its name (a job overwrites host files as root)" \
	podman-executor/channel/channel.go \
	'const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC' \
	'const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_CLOEXEC' \
	-- pe_test -run 'TestRunNeverWritesThroughPlantedLinks' ./channel/

mutant "podman-executor: the stage channel is mounted read-write in the job (a job plants links where the driver writes)" \
	podman-executor/executor/stage_prepare.go \
	'container.Mount{Source: dir, Destination: channel.MountPoint, ReadOnly: true}' \
	'container.Mount{Source: dir, Destination: channel.MountPoint, ReadOnly: false}' \
	-- pe_ci -run 'TestRealRunnerChannelLinks' ./integration/

mutant "podman-executor: a job's CI_PROJECT_ID names its cache and volumes again (another project's, if it says so)" \
	podman-executor/executor/job.go \
	'Project:    strconv.FormatInt(j.Response.JobInfo.ProjectID, 10),' \
	'Project:    j.Vars["CI_PROJECT_ID"],' \
	-- pe_test -run 'TestIdentityComesFromTheJobResponse' ./executor/

mutant "podman-executor: a job redefining CI_PROJECT_ID, CI_JOB_ID or CI_CONCURRENT_* is not refused (under the real runner)" \
	podman-executor/executor/executor.go \
	'if err := e.Job.CheckIdentity(); err != nil {' \
	'if err := error(nil); err != nil {' \
	-- pe_ci -run 'TestRealRunnerJobCannotChooseAnotherProject' ./integration/

mutant "podman-executor: a job may set CI_CONCURRENT_* (its slot: another job's builds volume)" \
	podman-executor/executor/job.go \
	'case strings.HasPrefix(k, "CI_CONCURRENT_"), runnerVariables[k]:' \
	'case runnerVariables[k]:' \
	-- pe_test -run 'TestIdentityComesFromTheJobResponse' ./executor/

mutant "podman-executor: [build] userns_mode \"host\" is accepted (a build job's SYS_ADMIN root is the host's root)" \
	podman-executor/executor/build.go \
	'if builds && (mode == "" || mode == "host") && !b.UnsafeBuildsAsHostRoot {' \
	'if false {' \
	-- pe_test -run 'TestConfigRefusesBuildsAsHostRoot' ./executor/

mutant "podman-executor: a branch job shares the protected refs' cache and volumes (it can poison what they build)" \
	podman-executor/executor/executor.go \
	'id.Protected = e.Config.SplitProtectedRefs && e.Job.Protected()' \
	'id.Protected = false' \
	-- pe_ci -run 'TestRealRunnerProtectedRefsKeepTheirCache' ./integration/

mutant "podman-executor: a job calling itself protected in its own variables is taken at its word" \
	podman-executor/executor/job.go \
	'		if v.Key == "CI_COMMIT_REF_PROTECTED" {
			return v.Value == "true"
		}' \
	'		if v.Key == "CI_COMMIT_REF_PROTECTED" && v.Value == "true" {
			return true
		}' \
	-- pe_test -run 'TestProtectedRefsKeepTheirOwnCacheAndVolumes' ./executor/

mutant "podman-executor: the image build tests skip under CI=true on a machine without /dev/fuse" \
	podman-executor/integration/build_test.go \
	'const fuseDevice = "/dev/fuse"' \
	'const fuseDevice = "/dev/fuse-absent"' \
	-- pe_ci -run 'TestImageBuildInJob' ./integration/

mutant "podman-executor: cleanup fails on podman's transient 'device or resource busy' instead of retrying" \
	podman-executor/executor/stage_cleanup.go \
	'if !errors.Is(err, container.ErrBusy) || waited >= removeRetryFor {' \
	'if !errors.Is(err, container.ErrBusy) || waited >= 0 {' \
	-- pe_test -run 'TestCleanupRetriesABusyRemoval' ./executor/
# Issue 41, items 4, 7 and 8 (depsd security): a FROM line must not make
# depsd probe a host of its writer's choosing, secrets stay out of output
# and files, one hook's secret must not forge another project's events.
mutant "a FROM line's registry is read whatever its host (the registry client's allowlist check removed)" \
	registry/registry.go \
	'	if c.allowed == nil {
		return nil
	}' \
	'	if true {
		return nil
	}' \
	-- go test -count=1 -run 'TestHostNotAllowedIsNeverAsked' ./registry/

mutant "the daemon allows every registry host (neither the instance's nor listed)" \
	daemon/registries.go \
	'	if p.listed[host] || p.isInstance(host) {' \
	'	if true {' \
	-- go test -count=1 -run 'TestRegistryPolicy' ./daemon/

mutant "a registry name resolving to a loopback or private address is connected to" \
	registry/policy.go \
	'	if !g.mayBeInternal(addr, "") {' \
	'	if false {' \
	-- go test -count=1 -run 'TestInternalAddressRefusedAtConnection' ./registry/

mutant "a registry's answer (its body) is kept in the error, and so in verdicts, image checks and logs" \
	registry/policy.go \
	'		return &readError{msg: msg, cause: err}' \
	'		return &readError{msg: msg + ": " + te.Error(), cause: err}' \
	-- go test -count=1 -run 'TestErrorsDoNotCarryTheAnswer' ./registry/

mutant "the image watcher's registry client is built without the registry lists" \
	daemon/schedules.go \
	'Resolver: registry.New(d.registryOptions()),' \
	'Resolver: registry.New(registry.Options{AuthFile: cfg.RegistryAuthFile}),' \
	-- go test -count=1 -run 'TestExternalImageChangeStartsChain' ./daemon/

mutant "the GitLab client follows a redirect from https to plain http (the token in clear)" \
	gitlab/transport.go \
	'if len(via) > 0 && via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {' \
	'if false {' \
	-- go test -count=1 -run 'TestNoRedirectToPlainHTTP' ./gitlab/

mutant "depsd config check prints the password of a postgres:// state" \
	cmd/depsd/configcmd.go \
	'	cfg.State = store.Redact(cfg.State)' \
	'	_ = store.Redact' \
	-- go test -count=1 -run 'TestNoCommandPrintsASecret' ./cmd/depsd/

mutant "the SQLite state keeps the umask's mode, readable by everyone (it holds the signing token)" \
	store/sqlite.go \
	'	if err := makePrivate(path); err != nil {' \
	'	if err := error(nil); err != nil {' \
	-- go test -count=1 -run 'TestSQLiteStateIsPrivate' ./store/

mutant "every project hook gets the same secret (the project id left out of its derivation): one leaked hook secret forges every project" \
	webhook/secrets.go \
	'derive(master, "project:"+strconv.FormatInt(projectID, 10))' \
	'derive(master, "project:"+strconv.FormatInt(0*projectID, 10))' \
	-- go test -count=1 -run 'TestHookSecretOfOneProjectCannotForgeAnother' ./daemon/

mutant "the shared secret still authenticates every project once each hook has its own" \
	webhook/handler.go \
	'	if h.opts.SecretMode != SecretShared && (h.opts.SharedSecretAccepted == nil || !h.opts.SharedSecretAccepted()) {' \
	'	if false {' \
	-- go test -count=1 -run 'TestHookSecretsArePerProject' ./webhook/

mutant "a group hook's secret is accepted for a project outside its group" \
	webhook/handler.go \
	'		case inScope && underGroup(path, g):' \
	'		case inScope && (underGroup(path, g) || true):' \
	-- go test -count=1 -run 'TestGroupHookSecretCoversItsGroupOnly' ./daemon/

# Issues 36, 38, 39: the fake GitLab's repository side and the client's
# refs, commits and merge requests.
mutant "a pipeline created on a tag is a branch pipeline (no tag: true in the API or the hook)" \
	gitlab/gitlabtest/pipelines.go \
	'	pl.tag = isTag
	pl.inputs = inputs' \
	'	pl.tag = false && isTag
	pl.inputs = inputs' \
	-- go test -count=1 -run 'TestTagPipelines|TestTags$' ./gitlab/gitlabtest/ ./gitlab/

mutant "a raw file's last commit is the ref's head (a last_commit_id read from it is refused once another file changes)" \
	gitlab/gitlabtest/handlers_projects.go \
	'h.Set("X-Gitlab-Last-Commit-Id", p.lastCommitFor(c.sha, file))' \
	'h.Set("X-Gitlab-Last-Commit-Id", c.sha)' \
	-- go test -count=1 -run 'TestRawFileLastCommitID|TestCreateCommit' ./gitlab/gitlabtest/ ./gitlab/

mutant "a commit's last_commit_id is not checked (a pin update overwrites a file changed since it was read)" \
	gitlab/gitlabtest/commits.go \
	'last != "" && last != a.lastCommitID {' \
	'last != "" && false {' \
	-- go test -count=1 -run 'TestCommitsAPI|TestCreateCommit' ./gitlab/gitlabtest/ ./gitlab/

mutant "a Developer's API commit to a protected branch is accepted" \
	gitlab/gitlabtest/commits.go \
	'	if !p.canPush(who.level, branch) {' \
	'	if false {' \
	-- go test -count=1 -run 'TestCommitsAPI|TestCreateCommit' ./gitlab/gitlabtest/ ./gitlab/

mutant "a push to a merge request's source branch keeps its auto-merge (GitLab aborts it)" \
	gitlab/gitlabtest/mergerequests.go \
	'	if mr.autoMerge {
		mr.autoMerge, mr.mergeUser = false, nil
		s.systemNote(mr, head.pusherOf(), "aborted' \
	'	if false {
		mr.autoMerge, mr.mergeUser = false, nil
		s.systemNote(mr, head.pusherOf(), "aborted' \
	-- go test -count=1 -run 'TestMergeRequestPipelinesAndAutoMerge' ./gitlab/gitlabtest/

mutant "an auto-merge never happens when the pipeline succeeds" \
	gitlab/gitlabtest/pipelines.go \
	'		s.autoMerge(pl)' \
	'' \
	-- go test -count=1 -run 'TestMergeRequestPipelinesAndAutoMerge|TestAutoMerge' ./gitlab/gitlabtest/ ./gitlab/

mutant "pushes and merges follow the server token's role whoever calls (a Maintainer member refused, a Reporter's token acting as a Developer)" \
	gitlab/gitlabtest/refs.go \
	'return actor{user: c.user, level: s.accessLevel(c, p)}' \
	'return actor{user: c.user, level: accessLevels[p.ci.withDefaults().TokenRole]}' \
	-- go test -count=1 -run 'TestRepositoryFollowsTheCaller' ./gitlab/gitlabtest/

mutant "GitLab's 401 to a merge the user may not make is taken for a rejected token" \
	gitlab/errors.go \
	'case e.Status == http.StatusUnauthorized && e.Method == http.MethodPut && strings.HasSuffix(e.Path, "/merge"):' \
	'case false:' \
	-- go test -count=1 -run 'TestMergeRequests$' ./gitlab/

# Issue 36: nodes (a project at a ref), release tags and maintenance branches.
mutant "an upgrade to nodes rebuilds what a newly followed ref built before it (catch-up)" \
	chain/catchup.go \
	'	if everyRef {
		return -projectID
	}' \
	'	if everyRef && false {
		return -projectID
	}' \
	-- go test -count=1 -run 'TestCatchUpOfFollowedRefs' ./chain/

mutant "a release tag's pipeline is dropped by the webhook receiver (tags were ignored before nodes)" \
	webhook/decode.go \
	'case a.Tag && !follows.follows(p.Project.PathWithNamespace, a.Ref, true):' \
	'case a.Tag:' \
	-- go test -count=1 -run 'TestReleaseTagAndMaintenanceBranchAcrossSIGKILL' ./e2e/

mutant "a maintenance branch's member is built on the default branch" \
	chain/nodes.go \
	'		_, ok := p.Refs[node]
		return branch, ok' \
	'		_, ok := p.Refs[node]
		_ = branch
		return p.DefaultBranch, ok' \
	-- go test -count=1 -run 'TestChainsOnReleaseTagsAndMaintenanceBranches' ./chain/

mutant "a new release is applied before the scan read it (its node may not exist yet)" \
	chain/inbox.go \
	'return ok && latest.Tag == tag && tag != stored, nil' \
	'return ok && false && latest.Tag == tag && tag != stored, nil' \
	-- go test -count=1 -run 'TestTagSeenPublishedByAReleaseMovesTheEdge' ./e2e/

mutant "a tag a release pushed is never recorded as seen" \
	daemon/verify.go \
	'if err != nil || !pushed[man.Digest] {' \
	'if true || err != nil || !pushed[man.Digest] {' \
	-- go test -count=1 -run 'TestTagSeenPublishedByAReleaseMovesTheEdge' ./e2e/

mutant "an unchanged project's refs are read again at every scan" \
	scan/refs.go \
	'if unchanged[p.ID] && old.RefsRule == p.RefsRule {' \
	'if false {' \
	-- go test -count=1 -run 'TestScanReadsFollowedRefs' ./scan/
# Issue 37 items 2-4 (sign-in, per-person visibility, actions with an
# audit log).
mutant "a dashboard page reads a chain without the person's scope" \
	dashboard/reads.go \
	'	v, ok := rd.v.Scope.Chain(c)' \
	'	v, ok := c, true' \
	-- go test -count=1 -run 'TestEveryRouteShowsOnlyWhatThePersonMaySee' ./dashboard/

mutant "the dashboard's graph is the whole graph whoever asks" \
	dashboard/reads.go \
	'	if err != nil || rd.v.Scope.Everything() {
		return all, err
	}
	return rd.d.scopedGraph(all, rd.v), nil' \
	'	return all, err' \
	-- go test -count=1 -run 'TestEveryRouteShowsOnlyWhatThePersonMaySee' ./dashboard/

mutant "the API's chains skip the person's scope" \
	daemon/http.go \
	'	if views = scope.Chains(views); len(views) > want {' \
	'	if len(views) > want {' \
	-- go test -count=1 -run 'TestSignedInPeopleSeeTheirProjectsAndDevelopersAct' ./daemon/

mutant "a hidden member keeps its name" \
	visible/visible.go \
	'		l := "hidden-" + strconv.Itoa(len(label)+1)' \
	'		l := p + strconv.Itoa(0)[:0]' \
	-- go test -count=1 ./visible/ ./dashboard/ ./daemon/ -run 'TestChainShowsHiddenMembers|TestEveryRoute|TestSignedInPeople'

mutant "a Reporter may act (the role check takes Reporter for enough)" \
	daemon/actions.go \
	'		if role < gitlab.Developer {' \
	'		if role < gitlab.Reporter {' \
	-- go test -count=1 -run 'TestSignedInPeopleSeeTheirProjectsAndDevelopersAct' ./daemon/

mutant "an action of a session without its CSRF token is carried out" \
	signin/signin.go \
	'	return got != "" && p.csrf != "" && constantEqual(got, p.csrf)' \
	'	return true' \
	-- go test -count=1 -run 'TestCSRF|TestReplayed|TestSignedInPeople' ./signin/ ./daemon/

mutant "a signed-out session's cookie still works (sign-out leaves the session in the store)" \
	signin/signin.go \
	'			if err := s.cfg.Store.DeleteSession(r.Context(), p.sessionID); err != nil {' \
	'			if err := error(nil); err != nil {' \
	-- go test -count=1 -run 'TestReplayedForgedAndExpiredSessionsAreRefused|TestSessionsSurviveAReplica' ./signin/

mutant "a forged session cookie is taken (the signature is not checked)" \
	signin/cookie.go \
	'	if err != nil || !hmac.Equal(got, s.mac(label, string(value))) {' \
	'	if err != nil || got == nil {' \
	-- go test -count=1 -run 'TestReplayedForgedAndExpiredSessionsAreRefused' ./signin/

mutant "a descendant whose upstreams all ended skipped is built anyway" \
	chain/settle.go \
	'	case ups > 0 && len(skipped) == ups:' \
	'	case false:' \
	-- go test -count=1 -run 'TestSkip' ./chain/

mutant "a skipped member keeps its chain unfinished" \
	chain/track.go \
	'	if s != Success && s != MemberSkipped {' \
	'	if s != Success {' \
	-- go test -count=1 -run 'TestSkip' ./chain/

# Issue 39 item 4: the build component (templates/image-build.yml) and
# the fake GitLab's include: component:.
mutant "the build component ignores the depsd_no_cache input" \
	templates/image-build.yml \
	'no_cache=true) no_cache=true ;;' \
	'no_cache=true) ;;' \
	-- go test -count=1 -run 'TestImageBuild' ./templates/

mutant "the build component ignores DEPSD_NO_CACHE" \
	templates/image-build.yml \
	'case ${DEPSD_NO_CACHE:-} in 1|true) no_cache=true ;; esac' \
	'case ${DEPSD_NO_CACHE:-} in 1|true) ;; esac' \
	-- go test -count=1 -run 'TestImageBuild' ./templates/

mutant "a validation build publishes the release tags" \
	templates/image-build.yml \
	'if [ "$validate" = true ]; then' \
	'if false; then' \
	-- go test -count=1 -run 'TestImageBuild' ./templates/

mutant "fake GitLab: an input interpolated alone loses its type (a forwarded boolean becomes a string)" \
	gitlab/gitlabtest/ciconfig.go \
	'm[0] == 0 && m[1] == len(n.Value)' \
	'false' \
	-- go test -count=1 -run 'TestIncludeComponent|TestParseCIConfig' ./gitlab/gitlabtest/

mutant "fake GitLab: a component's keys win over the including file's" \
	gitlab/gitlabtest/components.go \
	'	deepMerge(merged, out)
	return merged, nil' \
	'	deepMerge(out, merged)
	return out, nil' \
	-- go test -count=1 -run 'TestIncludeComponent' ./gitlab/gitlabtest/

# Issue 36, item 1's scan cost: followed refs read through the GraphQL batches.
mutant "a batch asks no followed branch's files (they are read apart, a request per 11 refs)" \
	scan/batch.go \
	'Branches: literalBranches(lp, rule)}' \
	'Branches: nil}' \
	-- go test -count=1 -run 'TestScanReadsFollowedRefs$|TestScanRefsRequestCounts' ./scan/ ./bench/

mutant "a followed branch a project does not have becomes a node (GraphQL)" \
	scan/refs.go \
	'branches = append([]string{}, pr.Branches...)' \
	'branches = append(literalBranches(listed[j.i], j.rule), pr.Branches...)' \
	-- go test -count=1 -run 'TestScanReadsFollowedRefs$' ./scan/

mutant "the projects a rule matches are not spread over the batches" \
	scan/scan.go \
	'batches[k%len(batches)] = append(batches[k%len(batches)], i)' \
	'batches[k/size%len(batches)] = append(batches[k/size%len(batches)], i)' \
	-- go test -count=1 -run 'TestScanRefsRequestCounts' ./bench/

mutant "the plan prices branchNames below GitLab's 170" \
	gitlab/graphqlrefs.go \
	'c := float64(1 + 1 + 1 + 170 + branches*blobsCost(names) + 1)' \
	'c := float64(1 + 1 + 1 + 100 + branches*blobsCost(names) + 1)' \
	-- go test -count=1 -run 'TestReadBatchReadsBranches' ./gitlab/

# Issue 37 item 1: the chains' commit statuses.
mutant "a status whose last post's outcome is unknown is posted again without reading GitLab (pending twice: 400)" \
	chain/statussend.go \
	'if wasInDoubt {' \
	'if false && wasInDoubt {' \
	-- go test -count=1 -run 'TestChainStatusAcrossCrashes' ./chain/

mutant "a status claim is not marked in doubt before its post" \
	chain/statussend.go \
	's.Doubt, s.LeaseUntil, s.ClaimedBy = true, now.Add(e.cfg.Lease), e.cfg.Owner' \
	's.Doubt, s.LeaseUntil, s.ClaimedBy = s.Doubt, now.Add(e.cfg.Lease), e.cfg.Owner' \
	-- go test -count=1 -run 'TestChainStatusAcrossCrashes' ./chain/

mutant "a running status is posted running again (GitLab refuses it)" \
	chain/commitstatus.go \
	'case have == CommitRunning && (want == CommitPending || want == CommitRunning):' \
	'case have == CommitRunning && want == CommitPending:' \
	-- go test -count=1 -run 'TestCommitStep|TestChainStatus' ./chain/

mutant "a chain's status is posted at every change (not coalesced)" \
	chain/statussend.go \
	's.NextSendAt = s.SentAt.Add(e.statusInterval())' \
	's.NextSendAt = s.SentAt' \
	-- go test -count=1 -run 'TestChainStatusIsCoalesced' ./chain/

# Issue 38 (digest pins): the rewrite changes nothing but the pins'
# digests, and the merge of a pin's merge request is the member's build
# exactly once.
mutant "a pin's rewrite also moves a digest written in a comment" \
	deps/pins.go \
	'if !code[lineAt(src, start)] {' \
	'if code == nil {' \
	-- go test -count=1 -run 'TestMovePins' ./deps/

mutant "a pin's rewrite is not checked by analysing the result" \
	deps/pins.go \
	'if after[i] != want {' \
	'if false && after[i] != want {' \
	-- go test -count=1 -run 'TestMovePins' ./deps/

mutant "the merge's pipeline counts again once the member moved on" \
	chain/pins.go \
	'case m.State == WaitingMerge && m.MergeSHA != "" && ev.SHA == m.MergeSHA:' \
	'case m.MergeSHA != "" && ev.SHA == m.MergeSHA:' \
	-- go test -count=1 -run 'TestPinnedMemberGoesOnThroughItsMergeRequest' ./chain/

mutant "a pin commit overwrites a file changed on the target since it was read" \
	chain/sendpins.go \
	'Content: string(out), LastCommitID: f.LastCommitSHA}},' \
	'Content: string(out)}},' \
	-- go test -count=1 -run 'TestPinsReReadAFileChangedMeanwhile' ./chain/

mutant "a file changed on the target since it was read is not read again" \
	chain/sendpins.go \
	'case errors.Is(err, gitlab.ErrConflict) && attempt == 1:' \
	'case false && errors.Is(err, gitlab.ErrConflict) && attempt == 1:' \
	-- go test -count=1 -run 'TestPinsReReadAFileChangedMeanwhile' ./chain/

mutant "a resend after a crash commits the pin moves again" \
	chain/sendpins.go \
	'err == nil && bytes.Equal(cur.Content, out) {' \
	'err == nil && false && bytes.Equal(cur.Content, out) {' \
	-- go test -count=1 -run 'TestPinnedMemberThroughItsMergeRequestAcrossSIGKILL' ./e2e/

mutant "the merge's pipeline is never looked for: only its webhook counts" \
	chain/pinwatch.go \
	'		if p == nil {
			continue // not created yet' \
	'		if true || p == nil {
			continue // not created yet' \
	-- go test -count=1 -run 'TestPinnedMemberGoesOnThroughItsMergeRequest' ./chain/

# Issue 40 item 2: the inbox's cheap path (chain/cheap.go) settles only
# what no chain can use (an event wrongly taken as useless fails a test),
# and one rescan covers the pushes recorded before it.
mutant "cheap path: a project in an active chain settled without its look-ups" \
	chain/cheap.go \
	'if !ok || t.projectInChain(path) {' \
	'if !ok {' \
	-- go test -count=1 -run 'FuzzCheapPathSameAsFull' ./chain/

mutant "cheap path: another node of a project in a chain not seen" \
	chain/cheap.go \
	'		if i < len(c.Members) && strings.HasPrefix(c.Members[i].Project, prefix) {' \
	'		if false && i < len(c.Members) && strings.HasPrefix(c.Members[i].Project, prefix) {' \
	-- go test -count=1 -run 'TestCheapPathSeesEveryNodeOfAProject' ./chain/

mutant "cheap path: depsd's own pipeline (its action id) settled cheaply" \
	chain/cheap.go \
	'ev.Variables[VarActionID] != "" || ' \
	'' \
	-- go test -count=1 -run 'TestCheapPathLeavesDepsdPipelinesToTheFullPath' ./chain/

mutant "cheap path: a success with something downstream settled cheaply" \
	chain/cheap.go \
	'if t.g.HasDownstream(node) || t.e.verifies(node) {' \
	'if t.e.verifies(node) {' \
	-- go test -count=1 -run 'FuzzCheapPathSameAsFull' ./chain/

mutant "cheap path: a success to verify for the record settled cheaply" \
	chain/cheap.go \
	'if t.g.HasDownstream(node) || t.e.verifies(node) {' \
	'if t.g.HasDownstream(node) {' \
	-- go test -count=1 -run 'FuzzCheapPathSameAsFull' ./chain/

mutant "a rescan covers only its own push (a burst of pushes, one scan each)" \
	chain/inbox.go \
	'	for _, se := range pending {
		covered = append(covered, se.Seq)' \
	'	for _, se := range pending[:0] {
		covered = append(covered, se.Seq)' \
	-- go test -count=1 -run 'TestPushesRecordedBeforeARescanShareIt' ./chain/

mutant "a rescan covers the pushes recorded while it runs" \
	chain/inbox.go \
	'	err = e.cfg.Rescan(ctx, projects)
	e.lastRescan.Store(time.Now().UnixNano())' \
	'	err = e.cfg.Rescan(ctx, projects)
	e.lastRescan.Store(time.Now().UnixNano())
	_ = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		pending, err = tx.UnprocessedPushes(ctx, maxCoveredPushes)
		return err
	})' \
	-- go test -count=1 -run 'TestPushesRecordedBeforeARescanShareIt' ./chain/

# Issue 40 item 3: a replica's recording never waits for the write lock
# another replica holds.
mutant "a recording waits for another replica's write lock" \
	store/chains.go \
	'				ra.tryLock = true' \
	'				ra.tryLock = false' \
	-- go test -count=1 -run 'TestRecordingDoesNotWaitForAnotherReplicasLock' ./store/

mutant "an event recorded only does not wake the inbox" \
	chain/recorder.go \
	'		// the webhook is answered now.
		e.NotifyInbox()' \
	'		// the webhook is answered now.' \
	-- go test -count=1 -run 'TestRecordedOnlyWhileAnotherReplicaHoldsTheLock' ./chain/

mutant "a recording queues behind this process's writers" \
	store/chains.go \
	'				ctx = withoutGateWait(ctx)' \
	'' \
	-- go test -count=1 -run 'TestRecordingDoesNotQueueBehindThisProcesssWriters' ./store/

# Issue 40, the ack's tail: what no chain can use is settled by the
# recording's own transaction; a recording that applies goes first through
# the gate; a rescan holds the write lock only to write what changed.
mutant "the recorder settles nothing as it records (every event wakes the inbox)" \
	chain/recorder.go \
	'		mode := settleCheap
' \
	'		mode := applyAll
' \
	-- go test -count=1 -run 'TestRecorderOnlyRecords|TestRecorderSettles' ./chain/

mutant "the recorder settles past an event a chain may use (out of order)" \
	chain/inbox.go \
	'		if err != nil || !cheap {
			return done, false, err' \
	'		if err != nil {
			return done, false, err' \
	-- go test -count=1 -run 'TestRecorderSettlesWhatNoChainCanUseAsItRecords' ./chain/

mutant "the recorder settles behind a backlog the inbox has to apply" \
	chain/recorder.go \
	'	if r.e.inboxIdle() {
		// Nothing older' \
	'	if true {
		// Nothing older' \
	-- go test -count=1 -run 'TestRecorderLeavesABacklogToTheInbox' ./chain/

mutant "a recording that applies queues behind this process's chain updates (SQLite)" \
	store/chains.go \
	'		ctx = withUrgentWrites(ctx)
	}
	if s.dialect.kind == KindPostgres {' \
	'	}
	if s.dialect.kind == KindPostgres {' \
	-- go test -count=1 -run 'TestRecordingThatAppliesGoesFirstThroughTheGate' ./store/

mutant "a scan applies what it read before another scan committed" \
	store/apply.go \
	'if early == nil || early.generation != gen {' \
	'if early == nil {' \
	-- go test -count=1 -run 'TestApplyScanOverReadsAgainWhatChangedSinceTheScanRead' ./store/

mutant "a rescan rewrites every unchanged project's row" \
	scan/scan.go \
	'p.HeadCommit, p.HeadCheckedAt, p.ScannedAt = prev.HeadCommit, prev.HeadCheckedAt, prev.ScannedAt' \
	'p.HeadCommit, p.HeadCheckedAt, p.ScannedAt = prev.HeadCommit, started, started' \
	-- go test -count=1 -run 'TestRescanLeavesUnchangedProjectsAsStored' ./scan/

mutant "a publish pattern's expression is compiled for every node at every scan" \
	deps/refs.go \
	'	return PublishPattern{re: &lazyRegexp{src: b.String()}}, nil' \
	'	l := &lazyRegexp{src: b.String()}
	l.get()
	return PublishPattern{re: l}, nil' \
	-- go test -count=1 -run 'TestPublishPatternsCompile' ./deps/

mutant "a file's cached analysis ignores the platforms it was read for" \
	scan/analysiscache.go \
	'	for _, p := range opts.Platforms {' \
	'	for _, p := range opts.Platforms[:0] {' \
	-- go test -count=1 -run 'TestAnalysisCacheKeysOnAllItDependsOn' ./scan/

mutant "a caller's change to a cached analysis reaches the next caller" \
	scan/analysiscache.go \
	'		Dependencies: slices.Clone(a.Dependencies),' \
	'		Dependencies: a.Dependencies,' \
	-- go test -count=1 -run 'TestAnalysisCacheKeysOnAllItDependsOn' ./scan/

# Issue 40, a push's rescan: the projects pushed to alone, at most one a
# second; what only a listing can tell lists the scope.
mutant "a push's rescan lists the whole scope" \
	daemon/daemon.go \
	'	opts.Only = only' \
	'	opts.Only = nil' \
	-- go test -count=1 -run 'TestPushRescansThePushedProjectAlone' ./e2e/

mutant "a push's rescan is reported as a scan of the whole scope (the scan metrics)" \
	daemon/daemon.go \
	'	if res.Targeted == 0 {' \
	'	if true || res.Targeted == 0 {' \
	-- go test -count=1 -run 'TestPushRescansThePushedProjectAlone' ./e2e/

mutant "a scan of pushed projects reads the other projects again when the listing cannot vouch for them" \
	scan/scan.go \
	'(kept[lp.ID] || kept == nil && gl.Unchanged(lp, known[lp.ID]))' \
	'(kept == nil && gl.Unchanged(lp, known[lp.ID]))' \
	-- go test -count=1 -run 'TestScanOfOnlyReadsThePushedProjectsAlone' ./scan/

mutant "a pushed project renamed since the last scan is read without listing the scope" \
	scan/only.go \
	'			case lp.Path != path:' \
	'			case false:' \
	-- go test -count=1 -run 'TestScanOfOnlyListsTheScopeWhenItMust' ./scan/

mutant "a pushed project archived since the last scan is read, not listed away" \
	scan/only.go \
	'			case !buildable:' \
	'			case !buildable && false:' \
	-- go test -count=1 -run 'TestScanOfOnlyListsTheScopeWhenItMust' ./scan/

mutant "a rescan reads only the first push's project (the pushes it covers are of others too)" \
	chain/inbox.go \
	'	projects := []string{push.Project}
	for _, se := range pending {' \
	'	projects := []string{push.Project}
	for _, se := range pending[:0] {' \
	-- go test -count=1 -run 'TestPushesRecordedBeforeARescanShareIt' ./chain/

mutant "rescans for pushes keep no gap" \
	chain/inbox.go \
	'	if e.cfg.RescanGap <= 0 || last == 0 {' \
	'	if true {' \
	-- go test -count=1 -run 'TestRescansForPushesKeepTheirGap' ./chain/

mutant "a kept ref's stored warnings are analysed again (they pile up)" \
	scan/refs.go \
	'HeadCommit: r.HeadCommit, Files: r.Files}' \
	'HeadCommit: r.HeadCommit, Files: r.Files, Warnings: r.Warnings}' \
	-- go test -count=1 -run 'TestUnchangedRefKeepsItsWarningsOnce' ./scan/

# Issue 40, session 18: SQLite's transactions take the active chains'
# versions as last read while the chains generation stays; recorded events
# are handed over as given; a transaction's marks go in one statement.
mutant "a chain saved without moving the chains generation on (other processes keep stale versions)" \
	store/chains.go \
	'	return t.tx.execLater(ctx, `UPDATE generations SET n = n + 1 WHERE name = '"'"'chains'"'"'`)' \
	'	return nil' \
	-- go test -count=1 -run 'TestChainCacheFollowsOtherWriters' ./store/

mutant "the versions kept are taken whatever the chains generation" \
	store/chaincache.go \
	'	if gen == 0 || gen != cc.chainsGen {
		return nil, false
	}
	return cc.versions, true' \
	'	if cc.versions == nil {
		return nil, false
	}
	return cc.versions, true' \
	-- go test -count=1 -run 'TestChainCacheFollowsOtherWriters' ./store/

mutant "versions read after a chain was saved in the transaction are kept for the next ones" \
	store/chaincache.go \
	'	if !t.cc.chainsWritten {' \
	'	if true {' \
	-- go test -count=1 -run 'TestVersionsReadAfterAWriteAreNotKept' ./store/

mutant "the events recorded in a transaction come before older ones read ahead" \
	store/events.go \
	'			older = append(older, r.given(i, seq))' \
	'			older = append([]aheadEvent{r.given(i, seq)}, older...)' \
	-- go test -count=1 -run 'TestEventsRecordedInATransactionAreAppliedAsStored' ./store/

mutant "the events recorded in a transaction are handed over when older ones are left unread" \
	store/events.go \
	'	if err != nil || len(older) == n {
		return older, false, err
	}' \
	'	if err != nil {
		return older, false, err
	}' \
	-- go test -count=1 -run 'TestEventsRecordedInATransactionAreAppliedAsStored' ./store/

mutant "a duplicate recorded in a transaction is handed over to be applied" \
	store/events.go \
	'		if !r.duplicate[i] {
			older = append(older, r.given(i, seq))' \
	'		if true {
			older = append(older, r.given(i, seq))' \
	-- go test -count=1 -run 'TestEventsRecordedInATransactionAreAppliedAsStored' ./store/

mutant "PostgreSQL: an event recorded in a transaction is handed over as another of the batch" \
	store/events.go \
	'			mine = append(mine, r.given(first[a.se.Key], a.se.Seq))' \
	'			mine = append(mine, r.given(0, a.se.Seq))' \
	-- go test -count=1 -run 'TestEventsRecordedInATransactionAreAppliedAsStored' ./store/

mutant "PostgreSQL: one statement of marks overwrites an event marked before" \
	store/events.go \
	'		WHERE events.seq = m.seq AND events.processed_at IS NULL`' \
	'		WHERE events.seq = m.seq`' \
	-- go test -count=1 -run 'TestMarksKeepEachEventsTimeAndResult' ./store/

mutant "SQLite: one statement of marks overwrites an event marked before" \
	store/events.go \
	'		WHERE events.seq = m.value ->> 0 AND +events.processed_at IS NULL`' \
	'		WHERE events.seq = m.value ->> 0`' \
	-- go test -count=1 -run 'TestMarksKeepEachEventsTimeAndResult' ./store/

mutant "SQLite: the statement of marks walks every unprocessed event and the list for each" \
	store/events.go \
	'		WHERE events.seq = m.value ->> 0 AND +events.processed_at IS NULL`' \
	'		WHERE events.seq = m.value ->> 0 AND events.processed_at IS NULL`' \
	-- go test -count=1 -run 'TestMarksFindEventsBySeq' ./store/

mutant "marks at one time with results of their own are written alike" \
	store/events.go \
	'return m.at != same.at || m.result != same.result' \
	'return m.at != same.at' \
	-- go test -count=1 -run 'TestMarksKeepEachEventsTimeAndResult' ./store/

mutant "PostgreSQL: marks written at the first mark's time" \
	store/events.go \
	'		seqs[i], ats[i], results[i] = m.seq, m.at, m.result' \
	'		seqs[i], ats[i], results[i] = m.seq, marks[0].at, m.result' \
	-- go test -count=1 -run 'TestMarksKeepEachEventsTimeAndResult' ./store/

mutant "an event read ahead is handed to the engine undecoded" \
	store/events.go \
	'		head.se, head.payload, head.encoded = head.decoded(), "", false' \
	'		head.payload, head.encoded = "", false' \
	-- go test -count=1 -run 'TestMarksKeepEachEventsTimeAndResult' ./store/

# issue 39: validations before the merge.
mutant "a validation pipeline whose answer was lost is created again (not adopted)" \
	chain/outbox.go \
	'		if vars[VarActionID] == a.ID {' \
	'		if vars[VarActionID] == a.ID && a.Kind != ActionValidate {' \
	-- go test -count=1 -run 'TestValidationPipelinesCreatedOnce' ./chain/

mutant "a merge request pipeline (a candidate) is taken for a release" \
	chain/validation.go \
	'return ev.Source == SourceMergeRequest || ev.MergeRequest != nil' \
	'return false && (ev.Source == SourceMergeRequest || ev.MergeRequest != nil)' \
	-- go test -count=1 -run 'TestCandidateIsNeverARelease' ./chain/

mutant "depth all: a level is built before the validation image of the one above is read" \
	chain/validation.go \
	'if m.State != Success || c.Validation.Depth != DepthAll || !c.hasDependents(m)' \
	'if m.State != Success || true || c.Validation.Depth != DepthAll || !c.hasDependents(m)' \
	-- go test -count=1 -run 'TestValidationOfADiamond' ./chain/

mutant "depth all: a diamond's bottom is built after one side only" \
	chain/settle.go \
	'		case um.State != Success:
			waitFor = append(waitFor, u)' \
	'		case um.State != Success && len(waitFor) > 0:
			waitFor = append(waitFor, u)' \
	-- go test -count=1 -run 'TestValidationOfADiamond' ./chain/

mutant "a note claimed by a dead sender waits out the claim's lease" \
	chain/validationnote.go \
	'	alive, err := t.tx.OwnerAlive(t.ctx, n.ClaimedBy, t.now)
	return !alive, err' \
	'	_, err := t.tx.OwnerAlive(t.ctx, n.ClaimedBy, t.now)
	return false, err' \
	-- go test -count=1 -run 'TestNoteClaimOfADeadSenderIsTakenOver' ./chain/

mutant "CurrentUser holds its lock across the request: an urgent caller waits behind a held normal one" \
	gitlab/instance.go \
	'	c.userMu.Lock()
	cached := c.user
	c.userMu.Unlock()' \
	'	c.userMu.Lock()
	defer c.userMu.Unlock()
	cached := c.user' \
	-- go test -count=1 -run 'TestCurrentUserOfUrgentWorkPassesAHeldNormalOne' ./gitlab/

# Issue 40, session 19: the stored projects kept between scans
# (store/projectscache.go).
mutant "the kept projects are given whatever the projects' generation" \
	store/projectscache.go \
	'	if c.projects == nil || c.generation != generation {' \
	'	if c.projects == nil {' \
	-- go test -count=1 -run 'TestProjectsAtReadsOnceTheGenerationMoves' ./store/

mutant "a written project kept as the scan gave it, not as read back" \
	store/projectscache.go \
	'		case q != nil:
			out = append(out, *q)' \
	'		case q != nil:
			out = append(out, p)' \
	-- go test -count=1 -run 'TestProjectsAtKeepsWhatAReadWouldReturn' ./store/

mutant "the kept projects in the scan's order, not by path" \
	store/projectscache.go \
	'	slices.SortFunc(out, func(a, b scan.Project) int { return strings.Compare(a.Path, b.Path) })' \
	'	_ = strings.Compare' \
	-- go test -count=1 -run 'TestProjectsAtKeepsWhatAReadWouldReturn' ./store/

mutant "the projects kept at the generation before the scan's" \
	store/apply.go \
	'		afterGen = gen + 1' \
	'		afterGen = gen' \
	-- go test -count=1 -run 'TestProjectsAtKeepsWhatAReadWouldReturn' ./store/

mutant "a scan writing many projects reads them all back under the write lock" \
	store/projectscache.go \
	'	if len(written) > maxReadBack {' \
	'	if len(written) > 1<<30 {' \
	-- go test -count=1 -run 'TestProjectsCacheLetsGoOfManyWritesAndOfIdleProjects' ./store/

mutant "a project whose files alone changed is not counted as written" \
	store/apply.go \
	'		if o == nil || !slices.EqualFunc(fileRows(o), fileRows(&p), func(a, b fileRow) bool { return a.node == b.node && sameFile(a.f, b.f) }) {
			changed = true' \
	'		if o == nil || !slices.EqualFunc(fileRows(o), fileRows(&p), func(a, b fileRow) bool { return a.node == b.node && sameFile(a.f, b.f) }) {' \
	-- go test -count=1 -run 'TestProjectsAtKeepsWhatAReadWouldReturn' ./store/

mutant "a scan whose write failed keeps what it wrote" \
	store/apply.go \
	'		s.projects.keep(0, nil)
		return fmt.Errorf("apply scan: %w", err)' \
	'		s.projects.keep(afterGen, after)
		return fmt.Errorf("apply scan: %w", err)' \
	-- go test -count=1 -run 'TestProjectsCacheKeepsNothingOfAScanThatFailed' ./store/

mutant "kept projects never let go" \
	store/projectscache.go \
	'		c.projects = nil
	})' \
	'	})' \
	-- go test -count=1 -run 'TestProjectsCacheLetsGoOfManyWritesAndOfIdleProjects' ./store/

if [ "$failed" -ne 0 ]; then
	echo "mutants: some mutants survived or are stale"
	exit 1
fi
echo "mutants: all killed"
