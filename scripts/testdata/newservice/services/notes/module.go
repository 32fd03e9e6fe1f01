package notes

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	notesv1 "github.com/collab/collab/proto/collab/notes/v1"

	"github.com/collab/collab/internal/apierr"
	"github.com/collab/collab/internal/authn"
	"github.com/collab/collab/internal/service"
)

// Module describes the notes service to the process that runs it.
func Module() service.Module {
	return service.Module{
		Name:        "notes",
		GRPCService: notesv1.NotesService_ServiceDesc.ServiceName,
		Gateway: func(ctx context.Context, mux *runtime.ServeMux, conn grpc.ClientConnInterface) error {
			return notesv1.RegisterNotesServiceHandlerClient(ctx, mux, notesv1.NewNotesServiceClient(conn))
		},
		Setup: func(*service.Flags) service.BuildFunc { return build },
	}
}

func build(_ context.Context, env service.Env) (*service.Instance, error) {
	o, err := env.ObserveStore(Module().Name)
	if err != nil {
		return nil, err
	}
	s := &server{store: observeStore(NewMemoryStore(), o)}
	return &service.Instance{
		Register: func(r grpc.ServiceRegistrar) { notesv1.RegisterNotesServiceServer(r, s) },
		Ping:     func(context.Context) error { return nil },
	}, nil
}

type server struct {
	notesv1.UnimplementedNotesServiceServer
	store Store
}

func (s *server) AddNote(ctx context.Context, req *notesv1.AddNoteRequest) (*notesv1.AddNoteResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetDocumentId() == "" || req.GetText() == "" {
		return nil, apierr.InvalidArgument("documentId and text are required.")
	}
	if err := s.store.Add(ctx, c.APIKey, req.GetDocumentId(), req.GetText()); err != nil {
		return nil, err
	}
	return &notesv1.AddNoteResponse{Status: "success", Message: "Note added."}, nil
}

func (s *server) GetNotes(ctx context.Context, req *notesv1.GetNotesRequest) (*notesv1.GetNotesResponse, error) {
	c, err := authn.RequireCaller(ctx)
	if err != nil {
		return nil, err
	}
	n, err := s.store.Notes(ctx, c.APIKey, req.GetDocumentId())
	if errors.Is(err, ErrNotFound) {
		return nil, apierr.NotFound("Document has no notes.")
	}
	if err != nil {
		return nil, err
	}
	return &notesv1.GetNotesResponse{Status: "success", Message: "Notes retrieved.", Data: &notesv1.Notes{Texts: n}}, nil
}
