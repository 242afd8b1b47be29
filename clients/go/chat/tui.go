package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	client "github.com/turngate/turngate/clients/go"
)

// Options configure the interactive chat.
type Options struct {
	Client *client.Client
	// Room opens that room; empty opens the picker.
	Room string
	// New creates a private room (titled NewTitle) and opens it.
	New      bool
	NewTitle string
	In       io.Reader
	Out      io.Writer
}

// Run runs the interactive chat until the member quits.
func Run(ctx context.Context, o Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &model{ctx: ctx, c: o.Client, roomID: o.Room, newRoom: o.New, newTitle: o.NewTitle, input: textinput.New(), width: 100, height: 30}
	m.input.Prompt = "> "
	m.input.Placeholder = "Message the assistant…"
	m.input.CharLimit = 16000
	m.input.Focus()
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(o.In), tea.WithOutput(o.Out))
	_, err := p.Run()
	if m.stream != nil {
		m.stream.Close()
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	return m.err
}

type model struct {
	ctx      context.Context
	c        *client.Client
	me       *client.MemberFields
	roomID   string
	newRoom  bool
	newTitle string

	rooms  []*client.ConversationFields
	cursor int
	room   *client.ConversationFields

	stream *client.RoomStream
	fold   *client.Fold
	state  client.State
	why    *client.Error

	input   textinput.Model
	notice  string
	stopped time.Time // when Ctrl-C last stopped a turn: a second quits
	width   int
	height  int
	err     error
}

type (
	startedMsg struct {
		me    *client.MemberFields
		rooms []*client.ConversationFields
		room  *client.ConversationFields
	}
	updateMsg  client.Update
	closedMsg  struct{}
	noticeMsg  string
	failureMsg struct{ err error }
	invitedMsg struct {
		email string
		added *client.AddedMember
	}
)

func (m *model) Init() tea.Cmd {
	return tea.Batch(textinput.Blink, m.start)
}

// start reads who the member is and their rooms, and creates or finds
// the room to open.
func (m *model) start() tea.Msg {
	me, err := m.c.Me(m.ctx)
	if err != nil {
		return failureMsg{err}
	}
	rooms, err := m.c.Conversations(m.ctx, 100)
	if err != nil {
		return failureMsg{err}
	}
	var room *client.ConversationFields
	switch {
	case m.newRoom:
		title := m.newTitle
		if title == "" {
			title = "Terminal chat " + time.Now().Format("2006-01-02 15:04")
		}
		if room, err = m.c.CreateConversation(m.ctx, title, client.ConversationKindPrivate); err != nil {
			return failureMsg{err}
		}
	case m.roomID != "":
		for _, r := range rooms {
			if r.Id == m.roomID {
				room = r
			}
		}
		if room == nil {
			// Not in the list (a public key, a channel, or not a member):
			// the stream says whether it may be read.
			room = &client.ConversationFields{Id: m.roomID, Title: m.roomID}
		}
	}
	return startedMsg{me: me, rooms: rooms, room: room}
}

// next waits for the stream's next update.
func next(s *client.RoomStream) tea.Cmd {
	return func() tea.Msg {
		u, ok := <-s.Updates()
		if !ok {
			return closedMsg{}
		}
		return updateMsg(u)
	}
}

func (m *model) open(r *client.ConversationFields) tea.Cmd {
	m.room = r
	m.fold = client.NewFold(0)
	m.stream = m.c.Follow(m.ctx, r.Id, 0)
	m.state = client.Connecting
	return next(m.stream)
}

// mine is the newest unfinished turn the member may command: their own,
// or any in a shared room they own.
func (m *model) mine() *client.TurnView {
	if m.fold == nil || m.me == nil {
		return nil
	}
	turns := m.fold.Turns()
	for i := len(turns) - 1; i >= 0; i-- {
		t := turns[i]
		if !t.Ended() && m.mayCommand(t) {
			return t
		}
	}
	return nil
}

func (m *model) mayCommand(t *client.TurnView) bool {
	return t.AuthorID == m.me.Id || m.owns()
}

// owns reports whether the member owns the open room and it is shared:
// they may command its turns and add members.
func (m *model) owns() bool {
	return m.room != nil && m.room.Owner != nil && m.me != nil && m.room.Owner.Id == m.me.Id && m.room.Kind == client.ConversationKindShared
}

// pending is the first approval the member may decide that waits.
func (m *model) pending() (*client.TurnView, *client.ApprovalView) {
	if m.fold == nil || m.me == nil {
		return nil, nil
	}
	for _, t := range m.fold.Turns() {
		if !m.mayCommand(t) {
			continue
		}
		for i := range t.Approvals {
			if t.Approvals[i].State == client.ApprovalStatePending {
				return t, &t.Approvals[i]
			}
		}
	}
	return nil, nil
}

func (m *model) do(what string, f func() error) tea.Cmd {
	return func() tea.Msg {
		if err := f(); err != nil {
			return noticeMsg(fmt.Sprintf("%s: %v", what, err))
		}
		return noticeMsg("")
	}
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.input.Width = max(10, msg.Width-4)
		return m, nil
	case failureMsg:
		m.err = msg.err
		return m, tea.Quit
	case startedMsg:
		m.me, m.rooms = msg.me, msg.rooms
		if msg.room != nil {
			return m, m.open(msg.room)
		}
		if len(m.rooms) == 0 {
			m.notice = "You have no rooms: start with --new."
		}
		return m, nil
	case updateMsg:
		u := client.Update(msg)
		if u.Entry != nil {
			m.fold.Apply(u.Entry)
		}
		m.state, m.why = u.State, u.Err
		return m, next(m.stream)
	case closedMsg:
		m.state = client.Closed
		return m, nil
	case noticeMsg:
		m.notice = string(msg)
		return m, nil
	case invitedMsg:
		if m.room != nil && msg.added.Room.Id == m.room.Id {
			m.room = msg.added.Room
		}
		m.notice = joinedNotice(msg.email, msg.added.WithheldTurns)
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

func (m *model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyCtrlC {
		if t := m.mine(); t != nil && time.Since(m.stopped) > 2*time.Second {
			m.stopped = time.Now()
			m.notice = "Stopping… (Ctrl-C again to quit)"
			id := t.ID
			return m, m.do("stop", func() error { _, _, err := m.c.Cancel(m.ctx, id, ""); return err })
		}
		return m, tea.Quit
	}
	if m.room == nil {
		// The picker.
		switch k.Type {
		case tea.KeyUp:
			m.cursor = max(0, m.cursor-1)
		case tea.KeyDown:
			m.cursor = min(len(m.rooms)-1, m.cursor+1)
		case tea.KeyEnter:
			if len(m.rooms) > 0 {
				return m, m.open(m.rooms[m.cursor])
			}
		case tea.KeyEsc:
			return m, tea.Quit
		}
		return m, nil
	}
	if t, a := m.pending(); a != nil && m.input.Value() == "" {
		switch k.String() {
		case "y", "n":
			decision := client.ApprovalDecisionApprove
			if k.String() == "n" {
				decision = client.ApprovalDecisionReject
			}
			id := a.ApprovalID
			_ = t
			return m, m.do("decide", func() error { _, err := m.c.DecideApproval(m.ctx, id, decision); return err })
		}
	}
	if k.Type == tea.KeyEnter {
		text := strings.TrimSpace(m.input.Value())
		if text == "" {
			return m, nil
		}
		m.input.SetValue("")
		room := m.room.Id
		if email, ok := inviteCommand(text); ok {
			m.notice = "Inviting " + email + "…"
			return m, m.invite(room, email)
		}
		if t := m.mine(); t != nil {
			id := t.ID
			m.notice = "Steering the running turn."
			return m, m.do("steer", func() error { _, _, err := m.c.Steer(m.ctx, id, text, ""); return err })
		}
		return m, m.do("send", func() error { _, err := m.c.Submit(m.ctx, room, text, client.SubmitOptions{}); return err })
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return m, cmd
}

// inviteCommand reads "/invite EMAIL" (or "/add EMAIL"): the owner of a
// shared room adds a member.
func inviteCommand(text string) (string, bool) {
	f := strings.Fields(text)
	if len(f) != 2 || (f[0] != "/invite" && f[0] != "/add") {
		return "", false
	}
	return f[1], true
}

// invite adds email to room and tells the owner what the newcomer will
// read withheld. The server decides who may: the room's owner, in a
// shared room.
func (m *model) invite(room, email string) tea.Cmd {
	return func() tea.Msg {
		added, err := m.c.AddRoomMember(m.ctx, room, email)
		if err == nil {
			return invitedMsg{email: email, added: added}
		}
		var e *client.Error
		switch {
		case !errors.As(err, &e):
			return noticeMsg(fmt.Sprintf("invite %s: %v", email, err))
		case e.Code == client.Forbidden:
			return noticeMsg("Only the room's owner can invite.")
		case e.Code == client.NotFound:
			return noticeMsg(fmt.Sprintf("No member has the email %s: they sign in to turngate once first.", email))
		default:
			return noticeMsg(fmt.Sprintf("invite %s: %s", email, e.Message))
		}
	}
}

// joinedNotice is what the owner is told of a member just added: how many
// earlier turns they will read withheld (they drew on documents the
// newcomer may not read), when there are any.
func joinedNotice(email string, withheld int) string {
	if withheld <= 0 {
		return email + " joined the room."
	}
	turns, them := "1 earlier turn", "it"
	if withheld > 1 {
		turns, them = fmt.Sprintf("%d earlier turns", withheld), "those"
	}
	return fmt.Sprintf("%s joined the room. %s drew on documents they may not read: they will see %s withheld.", email, turns, them)
}

var (
	dim   = lipgloss.NewStyle().Faint(true)
	bold  = lipgloss.NewStyle().Bold(true)
	warn  = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	title = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
)

func (m *model) View() string {
	if m.me == nil {
		return "Connecting…\n"
	}
	if m.room == nil {
		var b strings.Builder
		b.WriteString(title.Render("turngate") + " · choose a room (↑/↓, Enter; Esc quits)\n\n")
		for i, r := range m.rooms {
			mark := "  "
			if i == m.cursor {
				mark = "> "
			}
			fmt.Fprintf(&b, "%s%s %s\n", mark, r.Title, dim.Render(strings.ToLower(string(r.Kind))))
		}
		if m.notice != "" {
			b.WriteString("\n" + m.notice + "\n")
		}
		return b.String()
	}
	wrap := lipgloss.NewStyle().Width(max(20, m.width-2))
	var lines []string
	for _, t := range m.fold.Turns() {
		lines = append(lines, strings.Split(wrap.Render(bold.Render(t.Author+":")+" "+t.Input), "\n")...)
		for _, tool := range t.Tools {
			status := tool.Status
			if status == "" {
				status = "running…"
			}
			lines = append(lines, dim.Render("  · "+tool.Name+" "+status))
		}
		for _, a := range t.Approvals {
			lines = append(lines, warn.Render(fmt.Sprintf("  ! %s %s: %s", a.Tool, compact(a.Arguments), strings.ToLower(string(a.State)))))
		}
		for _, s := range t.Steers {
			lines = append(lines, dim.Render(fmt.Sprintf("  ↪ steer %q: %s", s.Text, strings.ToLower(string(s.State)))))
		}
		// An attempt a crash cut off: its partial answer, marked, above
		// the next attempt's, which starts again from the beginning.
		for _, p := range t.Interrupted {
			lines = append(lines, strings.Split(dim.Render(wrap.Render(fmt.Sprintf("  ✗ interrupted (attempt %d): %s", p.Attempt, firstWords(p.Text, 120)))), "\n")...)
		}
		switch {
		case t.Withheld && t.Answer != "":
			// The server's notice, in place of an answer this member may
			// not read.
			lines = append(lines, strings.Split(dim.Render(wrap.Render("  "+t.Answer)), "\n")...)
		case t.Withheld:
			lines = append(lines, dim.Render("  (withheld here: it drew on documents not everyone in this room may read)"))
		case t.Answer != "":
			lines = append(lines, strings.Split(wrap.Render("  "+t.Answer), "\n")...)
		}
		for i, cite := range t.Citations {
			lines = append(lines, strings.Split(dim.Render(wrap.Render(fmt.Sprintf("  [%d] %s: %s", i+1, cite.Source, cite.Passage))), "\n")...)
		}
		switch {
		case t.State == client.TurnStateQueued && t.QueuePosition > 0:
			lines = append(lines, dim.Render(fmt.Sprintf("  waiting: %d ahead", t.QueuePosition)))
		case t.State == client.TurnStateCancelled:
			lines = append(lines, dim.Render("  (stopped)"))
		case t.State == client.TurnStateFailed:
			lines = append(lines, warn.Render("  (failed: "+strings.ToLower(string(t.Terminal.Reason))+")"))
		}
		lines = append(lines, "")
	}
	// The newest lines that fit above the input and the status.
	if room := m.height - 4; room > 0 && len(lines) > room {
		lines = lines[len(lines)-room:]
	}
	state := string(m.state)
	if m.why != nil && m.state != client.Live {
		state += " (" + string(m.why.Code) + ")"
	}
	head := title.Render("turngate") + " · " + m.room.Title + " · " + state
	help := "Enter sends · Ctrl-C quits"
	if m.owns() {
		help += " · /invite EMAIL adds a member"
	}
	if m.mine() != nil {
		help = "Your turn is running: Enter steers it · Ctrl-C stops it"
	}
	if _, a := m.pending(); a != nil {
		help = warn.Render(fmt.Sprintf("Approve %s %s? y/n", a.Tool, compact(a.Arguments)))
	}
	if m.notice != "" {
		help = m.notice
	}
	if m.state == client.Closed && m.why != nil {
		help = warn.Render("This room is not available to you (" + string(m.why.Code) + "). Ctrl-C quits.")
	}
	return head + "\n" + strings.Join(lines, "\n") + "\n" + m.input.View() + "\n" + dim.Render(help) + "\n"
}

// firstWords is s on one line, cut to about n bytes with an ellipsis.
func firstWords(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s + "…"
	}
	cut := strings.LastIndex(s[:n], " ")
	if cut <= 0 {
		cut = n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	return s[:cut] + "…"
}

func compact(raw json.RawMessage) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
