package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// serveModernStdioAs is serveModernStdio for principal p.
func serveModernStdioAs(t *testing.T, g *Gateway, p approval.Principal) *rawAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(t.Context(), inR, outW, p) }()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return &rawAgent{t: t, in: inW, out: bufio.NewReader(outR)}
}

// TestStdioTaskIDsForgedAndExpired (branch attack45; TestStdioTaskIDsAttacked
// covers other malformed ids and a finished task): over stdio, as over HTTP,
// tasks/get, tasks/cancel and tasks/update of a task that was never
// created (a malformed id, a well-formed one with a forged or truncated
// MAC, a real id with one character changed, an id of 8 KiB), of another
// principal's task, and of a task whose record expired and was pruned,
// are each "task not found" (-32602) and change nothing: the real task
// stays working through another principal's cancel and then completes
// once approved; tasks/result (removed in 2026-07-28) is -32601. This held
// on ca0a3f75: coverage, not a fix. An expired task not yet pruned is
// still served (logged: the ttlMs it was given says it may be forgotten
// from then, not that it must be).
func TestStdioTaskIDsForgedAndExpired(t *testing.T) {
	db := sqlitetest.Open(t)
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	var skew atomic.Int64 // added to the gate's clock
	gk := gate.New(db, policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "ask-progress", Tools: []string{"progress"}, Effect: policy.Approve}},
	}), &gate.Options{Key: key, Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	g := newGateway(t, []ServerConfig{rawStdioServer("up")}, gk, &Options{Tasks: gk})
	waitUpstream(t, g, "up", nil)
	a := serveModernStdio(t, g)
	other := serveModernStdioAs(t, g, approval.Principal{ID: "other", Kind: "agent"})

	a.send(taskLine(1, "tools/call", `"name":"up__progress","arguments":{"k":"v"}`, true))
	held := decodeAnswer(t, []byte(a.response(1)))
	task, _ := held.Result["taskId"].(string)
	if held.Result["status"] != "working" || !strings.HasPrefix(task, "tgt_") {
		t.Fatalf("held call: %+v, want a working task", held)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(task, "tgt_"))
	if err != nil {
		t.Fatalf("task id %s: %v", task, err)
	}
	flip := []byte(task)
	flip[len(flip)-1] ^= 1
	forged := append(append([]byte(nil), raw[:16]...), make([]byte, len(raw)-16)...)
	bogus := []string{
		"tgt_", "tgt_!!", "x", "TGT_" + task[4:], string(flip),
		"tgt_" + base64.RawURLEncoding.EncodeToString(forged),
		"tgt_" + base64.RawURLEncoding.EncodeToString(raw[:16]),
		"tgt_" + base64.RawURLEncoding.EncodeToString(append(raw, 0)),
		task + "=", " " + task, "tgt_" + strings.Repeat("A", 8<<10),
	}
	id := 10
	ask := func(ag *rawAgent, method, taskID string) rpcAnswer {
		t.Helper()
		id++
		params := fmt.Sprintf(`"taskId":%q`, taskID)
		if method == "tasks/update" {
			params += `,"inputResponses":{"k":{"action":"accept"}}`
		}
		ag.send(taskLine(id, method, params, true))
		return decodeAnswer(t, []byte(ag.response(id)))
	}
	notFound := func(who, method, taskID string, got rpcAnswer) {
		t.Helper()
		if got.Error == nil || got.Error.Code != -32602 || got.Error.Message != "task not found" {
			t.Errorf("%s %s of %.40q: %+v, want -32602 task not found", who, method, taskID, got)
		}
	}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		for _, b := range bogus {
			notFound("desktop", m, b, ask(a, m, b))
		}
		notFound("other", m, task, ask(other, m, task))
	}
	if got := ask(a, "tasks/result", task); got.Error == nil || got.Error.Code != -32601 {
		t.Errorf("tasks/result: %+v, want -32601 (removed in 2026-07-28)", got)
	}
	if got := ask(a, "tasks/get", task); got.Error != nil || got.Result["status"] != "working" {
		t.Fatalf("the task after the others' attempts: %+v, want working", got)
	}
	aid := reviewOnlyPending(t, db, gk, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove)
	if o := waitOutcome(t, db, aid); o != approval.OutcomeOK {
		t.Fatalf("approved task's outcome %s", o)
	}
	done := ask(a, "tasks/get", task)
	if done.Error != nil || done.Result["status"] != "completed" {
		t.Fatalf("the approved task: %+v, want completed", done)
	}
	ttl, _ := done.Result["ttlMs"].(float64)
	if ttl <= 0 {
		t.Fatalf("the task's ttlMs %v", done.Result["ttlMs"])
	}
	// Past its ttlMs: served until pruned, then not found.
	skew.Store(int64(time.Duration(ttl)*time.Millisecond + time.Minute))
	t.Logf("past its ttlMs, before the sweep: %+v", ask(a, "tasks/get", task).Result["status"])
	if _, err := db.PruneLedger(t.Context(), time.Now().Add(time.Duration(skew.Load()))); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		notFound("desktop (expired)", m, task, ask(a, m, task))
	}
}
