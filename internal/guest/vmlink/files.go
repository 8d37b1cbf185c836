package vmlink

import (
	"errors"
	"os"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// The files API over a link: the guest agent serves a sandbox's files from inside the VM (the
// host never reads a VM's disk), with fsroot's checks there, as calls of these kinds. Open
// answers with a stream of the file (CallReader); Write reads one (CallUpload).
const (
	FilesOpen   = "files.open"
	FilesStat   = "files.stat"
	FilesList   = "files.list"
	FilesWrite  = "files.write"
	FilesMkdir  = "files.mkdir"
	FilesRemove = "files.remove"
)

// FileCall is a files call's body.
type FileCall struct {
	Path      string      `json:"path"`
	Mode      os.FileMode `json:"mode,omitempty"`
	Limit     int64       `json:"limit,omitempty"`
	Parents   bool        `json:"parents,omitempty"`
	Recursive bool        `json:"recursive,omitempty"`
}

// FileReply is a files call's answer: what the call returns, or the error it met, by kind.
type FileReply struct {
	Info *api.FileInfo  `json:"info,omitempty"`
	List []api.FileInfo `json:"list,omitempty"`
	Err  *FileError     `json:"error,omitempty"`
}

// FileError is an error of the guest's files API with its errdefs kind, so that the host answers
// it as it would its own (a 404 for a missing path, a 400 naming the field).
type FileError struct {
	Kind    string `json:"kind"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// fileKinds are the kinds a FileError carries, by name.
var fileKinds = map[string]error{
	"invalid": errdefs.ErrInvalidArgument, "notFound": errdefs.ErrNotFound, "conflict": errdefs.ErrConflict,
	"tooLarge": errdefs.ErrTooLarge, "denied": errdefs.ErrPermissionDenied, "unavailable": errdefs.ErrUnavailable,
	"noSpace": errdefs.ErrNoSpace,
}

// NewFileError describes err for the host; nil for nil.
func NewFileError(err error) *FileError {
	if err == nil {
		return nil
	}
	fe := &FileError{Message: err.Error()}
	for name, kind := range fileKinds {
		if errors.Is(err, kind) {
			fe.Kind = name
			break
		}
	}
	var field *errdefs.FieldError
	if errors.As(err, &field) {
		fe.Field, fe.Message = field.Field, field.Message
	}
	return fe
}

// Err is the error e describes, of its kind; nil for nil.
func (e *FileError) Err() error {
	if e == nil {
		return nil
	}
	kind := fileKinds[e.Kind]
	if e.Field != "" {
		return &errdefs.FieldError{Field: e.Field, Message: e.Message, Kind: kind}
	}
	if kind == nil {
		return errors.New(e.Message)
	}
	return errdefs.New(kind, "%s", e.Message)
}
