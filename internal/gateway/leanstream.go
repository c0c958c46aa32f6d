package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Parked 2025-era held calls (issue 13). A held call of a 2025-era
// session on the lean front (leanhold.go) writes on its POST's response
// while it is held: the `: hb` comments (heartbeat.go) and, when the agent
// sent a progress token, the gate's keep-alives (leanprog.go), and its
// answer goes as the event stream's last event, or, when nothing went out
// before it, as the whole response in application/json. Parked off
// net/http's connection (leanHold.park), the call's heartbeatWriter writes
// on a parkedStream instead of net/http's response: a ResponseWriter on the
// taken connection that frames what it is given as net/http's server
// would have framed it on that connection (HTTP/1.1, keep-alive): the
// status line and header at the first flush, then one chunk per flush,
// and, once the call is answered (finish), the last chunk and the
// terminating one, or, when nothing was flushed, the whole response with
// its Content-Length. After it the connection is served as net/http would
// have served it (serveRest): the client may send its next request on it.

// chunkingSize is how much an unflushed response may hold before it goes
// out chunked: net/http's bufferBeforeChunkingSize. A response whose
// handler returns holding no more (and that set no Content-Length) gets a
// Content-Length instead.
const chunkingSize = 2048

// A parkedStream is the response of a parked 2025-era held call, written
// on its connection (see above). Its writer (the call's heartbeatWriter,
// under its mutex) serialises every use of it.
type parkedStream struct {
	conn    net.Conn
	kept    parkedHeader // the header as the front set it, until Header rebuilds it
	h       http.Header  // nil until asked for
	status  int
	head    bool            // the status line and header went out
	chunked bool            // and the body is chunked (no Content-Length)
	buf     []byte          // written, not yet sent
	bufp    *[]byte         // buf's array, from bodies, while held (Write)
	timeout time.Duration   // for a write that takes nothing (writeParked)
	stop    <-chan struct{} // closed when the gateway closes
	err     error           // the first failed write: nothing is written after it
	gone    func()          // called once, at the first failed write (the client went away)
	// held is set while the call is held (until answerStream): what is
	// flushed then, a keep-alive or a ": hb" comment, is written from
	// the gate's beat or a timer, which must not wait for one client, so
	// it is written without waiting (writeNow): a connection that cannot
	// take it at once is the client gone, as a failed write is. The
	// answer, and the progress relayed before it, wait up to timeout.
	held bool
	// close is set when the client asked to close the connection after
	// the response ("Connection: close"): the head says so and the
	// connection ends after the response (answerStream).
	close bool
}

// errWouldBlock is a held call's write that its connection could not take
// at once (parkedStream.held): the client stopped reading.
var errWouldBlock = errors.New("the client's connection took no more without waiting")

// quickWriteTimeout bounds writeQuick: a held call's write on a
// connection that cannot be written without waiting (writeNow).
const quickWriteTimeout = 10 * time.Millisecond

// writeQuick writes p on conn within quickWriteTimeout.
func writeQuick(conn net.Conn, p []byte) error {
	_ = conn.SetWriteDeadline(time.Now().Add(quickWriteTimeout))
	_, err := conn.Write(p)
	_ = conn.SetWriteDeadline(time.Time{})
	return err
}

// Header is the response's header. Once the status line and header went
// out it is not kept (the map of a held call's header is ≈ 700 bytes,
// ten thousand of them 7 MB): what is set then has no effect, as on
// net/http's response after its header was written, and each call gets an
// empty one.
func (s *parkedStream) Header() http.Header {
	if s.head {
		return http.Header{}
	}
	if s.h == nil {
		h, err := s.kept.header()
		if err != nil {
			h = http.Header{}
		}
		s.h, s.kept = h, nil
	}
	return s.h
}

func (s *parkedStream) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}

func (s *parkedStream) Write(p []byte) (int, error) { return writeParkedBody(s, p) }

// WriteString is Write of a string: io.WriteString uses it, so that a
// held call's ": hb" comment (heartbeatWriter.beat) is not copied first.
func (s *parkedStream) WriteString(p string) (int, error) { return writeParkedBody(s, p) }

// writeParkedBody is parkedStream's Write and WriteString.
func writeParkedBody[T string | []byte](s *parkedStream, p T) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if s.err != nil {
		return 0, s.err
	}
	if s.buf == nil && s.held && s.head {
		// a keep-alive or ": hb" of a held call: written from a pooled
		// array, given back once sent (appendBody)
		s.bufp = getBody()
		s.buf = *s.bufp
	}
	s.buf = append(s.buf, p...)
	if !s.head && len(s.buf) > chunkingSize {
		// net/http starts the chunked stream once its buffer is full.
		if err := s.FlushError(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// FlushError sends what was written as a chunk, after the status line and
// header when they did not go out yet (http.ResponseController uses it).
func (s *parkedStream) FlushError() error {
	if s.err != nil {
		return s.err
	}
	b := getFrame()
	defer putFrame(b)
	if !s.head {
		s.writeHead(b, -1)
		s.head, s.h = true, nil
	}
	s.appendBody(b)
	return s.send(b.Bytes())
}

// frames are the buffers a parked stream's flush frames its bytes in
// (the chunk, after the head the first time): what it sends is written
// before the flush returns, so that the buffer is free again then (a
// held call's keep-alive allocates none).
var frames = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledFrame is the largest frame buffer put back into frames: a
// large answer's is left to the collector.
const maxPooledFrame = 64 << 10

func getFrame() *bytes.Buffer {
	b, _ := frames.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	b.Reset()
	return b
}

func putFrame(b *bytes.Buffer) {
	if b.Cap() <= maxPooledFrame {
		frames.Put(b)
	}
}

// bodies are the arrays a held call's parked stream keeps what is written
// in until it is flushed (parkedStream.Write): one keep-alive's or
// comment's bytes, sent and given back at once.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// getBody takes an empty array from bodies.
func getBody() *[]byte {
	bp, _ := bodies.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	*bp = (*bp)[:0]
	return bp
}

// putBody gives s.buf's array back to bodies when it came from there (a
// large one is left to the collector); s.buf is not used after it.
func (s *parkedStream) putBody() {
	if s.bufp == nil {
		return
	}
	if cap(s.buf) <= maxPooledFrame {
		*s.bufp = s.buf[:0]
		bodies.Put(s.bufp)
	}
	s.bufp = nil
}

// appendBody appends what was written and not yet sent, as a chunk when
// the body is chunked.
func (s *parkedStream) appendBody(b *bytes.Buffer) {
	if s.chunked {
		appendChunk(b, s.buf)
	} else {
		b.Write(s.buf)
	}
	if s.held {
		// Not kept between keep-alives (one every 15 s): its capacity
		// would stay with each of thousands of held calls.
		s.putBody()
		s.buf = nil
		return
	}
	s.buf = s.buf[:0]
}

// finish ends the response once the call is answered: the last chunk and
// the terminating one, or, when nothing went out, the whole response (with
// a Content-Length unless the header has one), as net/http ends a
// handler's response.
func (s *parkedStream) finish() error {
	if s.err != nil {
		return s.err
	}
	b := getFrame()
	defer putFrame(b)
	if !s.head {
		n := len(s.buf)
		if s.Header().Get("Content-Length") != "" {
			n = -1
		}
		s.writeHead(b, n)
		s.head, s.h = true, nil
		b.Write(s.buf)
	} else {
		s.appendBody(b)
		if s.chunked {
			b.WriteString("0\r\n\r\n")
		}
	}
	s.buf = nil
	if err := s.send(b.Bytes()); err != nil {
		return err
	}
	// The connection serves the client's next request now (serveRest):
	// a write after the end would go into that one's response.
	s.err = errParkedFinished
	return nil
}

// errParkedFinished is what a parked stream's writes return after its
// response ended (parkedStream.finish): nothing more is written on it.
var errParkedFinished = errors.New("the parked call's response has ended")

// writeHead writes the status line and header as net/http's server
// writes them for an HTTP/1.1 keep-alive response: the handler's header
// sorted, then the Date, the Content-Length (contentLength ≥ 0: the
// handler is done and set none), a sniffed Content-Type when none was set,
// "Connection: close" when the client asked to close and, without a
// Content-Length, "Transfer-Encoding: chunked".
func (s *parkedStream) writeHead(b *bytes.Buffer, contentLength int) {
	h := s.Header()
	if s.close {
		h.Del("Connection") // as net/http's: one "Connection: close", below
	}
	if s.status == 0 {
		s.status = http.StatusOK
	}
	text := http.StatusText(s.status)
	if text == "" {
		text = "status code " + strconv.Itoa(s.status)
	}
	fmt.Fprintf(b, "HTTP/1.1 %03d %s\r\n", s.status, text)
	_ = h.Write(b) // a bytes.Buffer does not fail
	if _, ok := h["Date"]; !ok {
		b.WriteString("Date: ")
		b.Write(time.Now().UTC().AppendFormat(nil, http.TimeFormat))
		b.WriteString("\r\n")
	}
	if contentLength >= 0 {
		b.WriteString("Content-Length: " + strconv.Itoa(contentLength) + "\r\n")
	}
	if _, ok := h["Content-Type"]; !ok && len(s.buf) > 0 {
		b.WriteString("Content-Type: " + http.DetectContentType(s.buf) + "\r\n")
	}
	if s.close {
		b.WriteString("Connection: close\r\n")
	}
	if contentLength < 0 && h.Get("Content-Length") == "" {
		s.chunked = true
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	b.WriteString("\r\n")
}

// appendChunk appends p as one chunk of a chunked body (nothing when p is
// empty: an empty chunk would end the body).
func appendChunk(b *bytes.Buffer, p []byte) {
	if len(p) == 0 {
		return
	}
	b.Write(strconv.AppendInt(b.AvailableBuffer(), int64(len(p)), 16))
	b.WriteString("\r\n")
	b.Write(p)
	b.WriteString("\r\n")
}

// send writes p on the connection (writeParked: a client that takes none
// of it within the stream's timeout fails it); the first failure is kept
// (and gone called): the client is gone, or stopped reading.
func (s *parkedStream) send(p []byte) error {
	var err error
	if s.held {
		err = writeNow(s.conn, p)
	} else {
		_, err = writeParked(s.conn, p, s.timeout, s.stop)
	}
	if err != nil {
		s.err = err
		if s.gone != nil {
			s.gone()
		}
	}
	return err
}

// parkOn makes h write on s, the parked stream of its call, in place of
// net/http's response (leanHold.park); nothing was written yet.
func (h *heartbeatWriter) parkOn(s *parkedStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.w = s
}

// answering marks s, the parked stream h writes on, no longer held: the
// call's answer (and the progress relayed before it) may wait for the
// client (parkedStream.held).
func (h *heartbeatWriter) answering(s *parkedStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.held = false
}

// finishParked ends s, the parked stream h writes on (parkedStream.finish),
// once the call is answered and h stopped.
func (h *heartbeatWriter) finishParked(s *parkedStream) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.finish()
}

// answerStream answers the parked 2025-era call l on its stream, as
// ServeHTTP answers a call held on the connection's goroutine, ends the
// response as net/http would after the handler returned, and serves the
// connection on (serveRest), with what the client sent after the POST.
//
//go:noinline // its locals stay out of waitParked's parked frame
func (l *leanHold) answerStream() {
	conn, pending, cw, ps, srv := l.pc.conn, l.pc.pending, l.pc.watch, l.pc.stream, l.pc.srv
	l.pc = nil
	l.w.answering(ps)
	l.answer()
	l.end()
	got, more := cw.stop()
	pending = append(pending, got...)
	if err := l.w.finishParked(ps); err != nil {
		l.f.g.log.Debug("cannot write a parked call's answer", "err", err)
		_ = conn.Close()
		return
	}
	if ps.close {
		closeAfterReply(conn, more || len(pending) > 0)
		return
	}
	l.f.serveRest(conn, pending, more || len(pending) > 0, srv)
}

// rstAvoidanceDelay is how long closeAfterReply lets a client that sent
// more than it was answered read its answer before the connection is
// closed: net/http's own delay (server.go) for the same case.
const rstAvoidanceDelay = 500 * time.Millisecond

// closeAfterReply closes conn, a parked call's connection whose client
// asked to close it after the answer, which went out. When the client
// sent more (unread: more), closing at once could make the kernel reset
// the connection and lose the answer before the client read it, so, as
// net/http does, conn's writing half is closed first and the connection
// closed after rstAvoidanceDelay, without a goroutine meanwhile.
func closeAfterReply(conn net.Conn, more bool) {
	cw, ok := conn.(interface{ CloseWrite() error })
	if !more || !ok || cw.CloseWrite() != nil {
		_ = conn.Close()
		return
	}
	time.AfterFunc(rstAvoidanceDelay, func() { _ = conn.Close() })
}
