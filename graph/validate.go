package graph

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"

	"github.com/turngate/turngate/errcode"
	"github.com/turngate/turngate/graph/extension"
	"github.com/turngate/turngate/graph/model"
	"github.com/turngate/turngate/turn"
)

// validate checks inputs at the edge, before any domain call, so bad input
// changes nothing.
var validate = newValidator()

var idempotencyKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// specialistPattern is a specialist's slug as submitMessage accepts it.
var specialistPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string { return f.Tag.Get("json") })
	must(v.RegisterValidation("idempotencykey", func(fl validator.FieldLevel) bool {
		return idempotencyKeyPattern.MatchString(fl.Field().String())
	}))
	must(v.RegisterValidation("specialist", func(fl validator.FieldLevel) bool {
		return specialistPattern.MatchString(fl.Field().String())
	}))
	// notblank: text with something a person can see (not only spaces,
	// zero-width or other invisible characters).
	must(v.RegisterValidation("notblank", func(fl validator.FieldLevel) bool {
		return extension.Visible(fl.Field().String())
	}))
	// maxbytes bounds a string's length in bytes (max counts characters).
	must(v.RegisterValidation("maxbytes", func(fl validator.FieldLevel) bool {
		n, err := strconv.Atoi(fl.Param())
		return err == nil && len(fl.Field().String()) <= n
	}))
	// steertext is a steering instruction as turn.Steer accepts it.
	v.RegisterAlias("steertext", fmt.Sprintf("notblank,maxbytes=%d", turn.MaxSteerText))
	return v
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// submitInput is submitMessage's input as validated.
type submitInput struct {
	ConversationID string   `json:"conversationId" validate:"required,max=200"`
	Text           string   `json:"text" validate:"notblank"`
	IdempotencyKey string   `json:"idempotencyKey" validate:"idempotencykey"`
	Specialist     *string  `json:"specialist" validate:"omitnil,specialist"`
	DocumentIDs    []string `json:"documentIds" validate:"max=20,dive,uuid"`
	ArtifactIDs    []string `json:"artifactIds" validate:"max=20,dive,uuid"`
}

// submitInputOf is input as check validates it. An empty specialist is
// no specialist: genqlient, and other clients that send an unset optional
// string as "", send it for every message not routed to one.
func submitInputOf(input model.SubmitMessageInput) submitInput {
	in := submitInput{ConversationID: input.ConversationID, Text: input.Text, IdempotencyKey: input.IdempotencyKey,
		Specialist: input.Specialist, DocumentIDs: input.DocumentIds, ArtifactIDs: input.ArtifactIds}
	if in.Specialist != nil && *in.Specialist == "" {
		in.Specialist = nil
	}
	return in
}

// parseIDs parses ids that check has validated as UUIDs.
func parseIDs(field string, ids []string) ([]uuid.UUID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]uuid.UUID, len(ids))
	for i, s := range ids {
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, errcode.Invalid(field, "%s must be UUIDs", field)
		}
		out[i] = id
	}
	return out, nil
}

type renameConversationInput struct {
	ConversationID string `json:"conversationId" validate:"required,max=200"`
	Title          string `json:"title" validate:"notblank,max=200"`
}

type createConversationInput struct {
	Title string `json:"title" validate:"notblank,max=200"`
	Agent string `json:"agent" validate:"omitempty,max=100"`
}

// documentTitleInput is a document's title as addDocument and
// replaceDocument accept it (the admin service bounds its length).
type documentTitleInput struct {
	Title string `json:"title" validate:"notblank"`
}

type roomMemberInput struct {
	ConversationID string `json:"conversationId" validate:"required,max=200"`
	Email          string `json:"email" validate:"required,email,max=320"`
}

// steerInput is steerTurn's input as validated.
type steerInput struct {
	CommandID string `json:"commandId" validate:"uuid"`
	TurnID    string `json:"turnId" validate:"uuid"`
	Text      string `json:"text" validate:"steertext"`
}

type pageInput struct {
	First int64 `json:"first" validate:"min=1,max=500"`
	After int64 `json:"after" validate:"min=0"`
}

// check validates v and turns the first failure into a BAD_USER_INPUT
// error naming the field.
func check(v any) error {
	err := validate.Struct(v)
	if err == nil {
		return nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) || len(verrs) == 0 {
		return fmt.Errorf("validate input: %w", err)
	}
	fe := verrs[0]
	return errcode.Invalid(fe.Field(), "%s", describe(fe))
}

func describe(fe validator.FieldError) string {
	switch fe.ActualTag() { // the failing tag, inside an alias
	case "required":
		return fe.Field() + " must not be empty"
	case "notblank":
		return fe.Field() + " must have a visible character (not only spaces or invisible characters)"
	case "idempotencykey":
		return fe.Field() + " must be 1 to 128 characters of A-Z a-z 0-9 . _ : -"
	case "specialist":
		return fe.Field() + " must be 1 to 64 characters of a-z 0-9 _ -"
	case "oneof":
		return fmt.Sprintf("%s must be one of %s", fe.Field(), fe.Param())
	case "email":
		return fe.Field() + " must be an email address"
	case "uuid":
		return fe.Field() + " must be a UUID"
	case "maxbytes":
		return fmt.Sprintf("%s must be at most %s bytes", fe.Field(), fe.Param())
	case "max":
		if fe.Kind() == reflect.Slice {
			return fmt.Sprintf("%s must have at most %s items", fe.Field(), fe.Param())
		}
		return fmt.Sprintf("%s must be at most %s", fe.Field(), fe.Param())
	case "min":
		return fmt.Sprintf("%s must be at least %s", fe.Field(), fe.Param())
	default:
		return fe.Field() + " is invalid"
	}
}

// checkTextLen bounds a message by the configured limit, in characters.
func checkTextLen(text string, limit int) error {
	if n := utf8.RuneCountInString(text); n > limit {
		return errcode.Invalid("text", "text is %d characters; the limit is %d", n, limit)
	}
	return nil
}
