package chain

import (
	"context"
	"testing"
	"time"
)

// TestSlotFreedBeforeTheClaimerSawItsClaimFull: a claim found more due
// actions than free slots, and the send it started ended (its slot freed)
// before the claimer was back from the claim to note that it ran out of
// slots. The claimer must claim again: otherwise the action left behind
// waits for the next poll, and SendPending returns without sending it (a
// CI run of TestNextCreateDoesNotWaitForTheRecording caught it so).
func TestSlotFreedBeforeTheClaimerSawItsClaimFull(t *testing.T) {
	e := &Engine{cfg: Config{SendConcurrency: 1}}
	s := e.newSenders(context.Background(), func(error) {})
	s.claiming = true // the claimer is in its claim
	if !s.reserve() {
		t.Fatal("the claim's first due action found no slot free")
	}
	if s.reserve() {
		t.Fatal("the claim's second due action got a slot of one")
	}
	// The first action's send ends, before the claimer is back.
	<-s.slots
	s.slotFreed()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.again {
		t.Error("the slot freed during a claim that ran out of slots asked for no claim")
	}
}

// TestClaimerThatFoundEverySlotBusyLeavesTheClaimToTheNextSlot: woken
// while every slot sends, the claimer claims nothing; the next slot to
// come free must then ask for the claim, or what woke it waits for the
// poll.
func TestClaimerThatFoundEverySlotBusyLeavesTheClaimToTheNextSlot(t *testing.T) {
	e := &Engine{cfg: Config{SendConcurrency: 1}}
	s := e.newSenders(context.Background(), func(error) {})
	if !s.reserve() {
		t.Fatal("no slot free for the send in flight")
	}
	s.spawn() // a wake-up: an action was written without a sender
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		claiming, mayBeDue := s.claiming, s.mayBeDue
		s.mu.Unlock()
		if !claiming {
			if !mayBeDue {
				t.Error("the claimer found every slot busy and left nothing for the next slot to come free to claim")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the claimer did not end")
		}
		time.Sleep(time.Millisecond)
	}
}
