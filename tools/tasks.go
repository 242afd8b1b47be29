package tools

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/turngate/turngate/pg"
)

// Task tools manage the member's own tasks; writing needs tasks.write.
const (
	CreateTaskName = "create_task"
	ListTasksName  = "list_tasks"
	UpdateTaskName = "update_task"
)

// CreateTask creates a task owned by the member, in the turn's room.
type CreateTask struct{}

// Spec implements Tool.
func (CreateTask) Spec() Spec {
	return Spec{Name: CreateTaskName, Description: "Create a task for the member.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)}
}

// Permission implements Tool.
func (CreateTask) Permission() string { return "tasks.write" }

// Run implements Tool.
func (CreateTask) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		Title string `json:"title"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	title := strings.TrimSpace(args.Title)
	if title == "" || len(title) > 500 {
		return Result{}, fmt.Errorf("%w: title must be 1 to 500 bytes", ErrBadArguments)
	}
	id := uuid.New()
	if _, err := call.DB.ExecContext(ctx, `INSERT INTO tasks (id, owner_id, conversation_id, title, status, updated_at) VALUES ($1, $2, $3, $4, 'open', now())`,
		id, call.Actor.MemberID, call.Actor.ConversationID, title); err != nil {
		return Result{}, fmt.Errorf("create task: %w", err)
	}
	return Result{Content: fmt.Sprintf("Created task task:%s %q (open).", id, title)}, nil
}

// ListTasks lists the member's tasks.
type ListTasks struct{}

// Spec implements Tool.
func (ListTasks) Spec() Spec {
	return Spec{Name: ListTasksName, Description: "List the member's tasks, open first.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string","enum":["open","done"]}}}`)}
}

// Permission implements Tool.
func (ListTasks) Permission() string { return "" }

// Run implements Tool.
func (ListTasks) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		Status string `json:"status"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	if args.Status != "" && args.Status != "open" && args.Status != "done" {
		return Result{}, fmt.Errorf("%w: status is open or done", ErrBadArguments)
	}
	rows, err := call.DB.QueryContext(ctx, `SELECT id, title, status FROM tasks WHERE owner_id = $1 AND ($2 = '' OR status = $2)
ORDER BY status = 'done', created_at LIMIT 50`, call.Actor.MemberID, args.Status)
	if err != nil {
		return Result{}, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id uuid.UUID
		var title, status string
		if err := rows.Scan(&id, &title, &status); err != nil {
			return Result{}, err
		}
		fmt.Fprintf(&b, "task:%s [%s] %s\n", id, status, title)
	}
	if err := rows.Err(); err != nil {
		return Result{}, err
	}
	if b.Len() == 0 {
		return Result{Content: "The member has no tasks."}, nil
	}
	return Result{Content: b.String()}, nil
}

// UpdateTask changes one of the member's tasks.
type UpdateTask struct{}

// Spec implements Tool.
func (UpdateTask) Spec() Spec {
	return Spec{Name: UpdateTaskName, Description: "Update one of the member's tasks: its title or its status.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"title":{"type":"string"},"status":{"type":"string","enum":["open","done"]}},"required":["id"]}`)}
}

// Permission implements Tool.
func (UpdateTask) Permission() string { return "tasks.write" }

// Run implements Tool.
func (UpdateTask) Run(ctx context.Context, call Call) (Result, error) {
	var args struct {
		ID     string `json:"id"`
		Title  string `json:"title"`
		Status string `json:"status"`
	}
	if err := decode(call.Arguments, &args); err != nil {
		return Result{}, err
	}
	id, err := uuid.Parse(strings.TrimPrefix(args.ID, "task:"))
	if err != nil {
		return Result{}, fmt.Errorf("%w: id is not a task id", ErrBadArguments)
	}
	if args.Status != "" && args.Status != "open" && args.Status != "done" {
		return Result{}, fmt.Errorf("%w: status is open or done", ErrBadArguments)
	}
	var title, status string
	err = pg.QueryRow(ctx, call.DB, `UPDATE tasks SET title = COALESCE(NULLIF($3, ''), title), status = COALESCE(NULLIF($4, ''), status), updated_at = now()
WHERE id = $1 AND owner_id = $2 RETURNING title, status`, []any{id, call.Actor.MemberID, strings.TrimSpace(args.Title), args.Status}, &title, &status)
	if errors.Is(err, sql.ErrNoRows) {
		// Another member's task reads as one that does not exist.
		return Result{}, &Refusal{Status: "not_found", Message: "The member has no task with that id."}
	}
	if err != nil {
		return Result{}, fmt.Errorf("update task: %w", err)
	}
	return Result{Content: fmt.Sprintf("Task task:%s is now %q (%s).", id, title, status)}, nil
}
