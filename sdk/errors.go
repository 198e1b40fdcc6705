package sdk

import (
	"errors"

	"github.com/factline/factline/sdk/abi"
)

// Statuses of a reply, as in sdk/ABI.md.
const (
	StatusOK             = abi.StatusOK
	StatusBusinessError  = abi.StatusBusinessError
	StatusBadInput       = abi.StatusBadInput
	StatusUnknownCommand = abi.StatusUnknownCommand
	StatusUnsupported    = abi.StatusUnsupported
	StatusPanic          = abi.StatusPanic
)

// Error is an error reply: a status (1 to 5) and the ABI's error fields.
// Return one from a decide or handle function (usually made with Refuse or
// Invalid) to choose the status; any other error is a business error with
// code "refused".
type Error struct {
	Status  abi.Status
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Code + ": " + e.Field + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Refuse returns a business error (status 1): the command is well formed
// but the entity's rules forbid it. The host answers 422.
func Refuse(code, message string) error {
	return &Error{Status: StatusBusinessError, Code: code, Message: message}
}

// Invalid returns a bad-input error (status 2) about one input field
// (empty for the input as a whole). The host answers 400.
func Invalid(field, code, message string) error {
	return &Error{Status: StatusBadInput, Code: code, Message: message, Field: field}
}

// asReply turns any error into the *Error the SDK writes.
func asReply(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Status == StatusOK {
			c := *e
			c.Status = StatusBusinessError
			return &c
		}
		return e
	}
	return &Error{Status: StatusBusinessError, Code: "refused", Message: err.Error()}
}
