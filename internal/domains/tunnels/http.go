package tunnels

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type tunnelOutput struct{ Body Tunnel }

type ticketOutput struct{ Body Ticket }

type createInput struct{ Body NewTunnel }

type listInput struct {
	httpapi.PageQuery
	DeviceID string `query:"deviceId" format:"uuid" doc:"Only the tunnels of this device."`
	Status   string `query:"status" enum:"open,closed,expired" doc:"Only tunnels in this status."`
}

// Register adds the /tunnels routes and the proxy.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Tunnels"
	httpapi.Register(api, httpapi.Route{ID: "create-tunnel", Method: http.MethodPost, Path: "/tunnels", Tag: tag,
		Permission: access.RemoteAccess, MFA: true, Status: http.StatusCreated, Summary: "Open a tunnel",
		Description: "Opens an HTTP(S) reverse proxy, through the device's agent, to targetHost:targetPort as the device reaches it. " +
			"A loopback or link-local target of the device itself (127.0.0.0/8, ::1, localhost, 169.254.0.0/16, fe80::/10) is refused " +
			"(400 " + CodeDeviceLocal + ") unless TUNNEL_ALLOW_DEVICE_LOCAL is set; the agent refuses names that resolve to such addresses. " +
			"Another tenant's or an unknown device: 404.",
		Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *createInput) (*tunnelOutput, error) {
			t, err := s.Create(ctx, in.Body)
			return &tunnelOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-tunnels", Method: http.MethodGet, Path: "/tunnels", Tag: tag,
		Permission: access.RemoteAccess, Summary: "List tunnels", Description: "Tunnels in scope, newest first."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Tunnel], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{DeviceID: in.DeviceID, Status: in.Status}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-tunnel", Method: http.MethodGet, Path: "/tunnels/{id}", Tag: tag,
		Permission: access.RemoteAccess, Summary: "Get a tunnel", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*tunnelOutput, error) {
			t, err := s.Get(ctx, in.ID)
			return &tunnelOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-tunnel", Method: http.MethodDelete, Path: "/tunnels/{id}", Tag: tag,
		Permission: access.RemoteAccess, Status: http.StatusNoContent, Summary: "Close a tunnel",
		Description: "Closes the tunnel: its proxy answers 404 " + CodeClosed + " from then on. The tunnel stays listed as closed. " +
			"A tunnel closed already: 409 " + CodeClosed + ".",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.Close(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "create-tunnel-http-ticket", Method: http.MethodPost, Path: "/tunnels/{id}/http-ticket",
		Tag: tag, Permission: access.RemoteAccess, MFA: true, Summary: "Mint a one-time HTTP-proxy ticket",
		Description: "A single-use ticket, valid 5 minutes, bound to the caller. Opening url (the proxy's root with ?" + TicketParam +
			"=<ticket>) redeems it: the answer is a redirect to the same URL without the ticket, setting the proxy's signed cookie. " +
			"A closed or expired tunnel: 409 " + CodeClosed + ".",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *idPath) (*ticketOutput, error) {
			t, err := s.IssueTicket(ctx, in.ID)
			return &ticketOutput{t}, err
		})
	api.Handle(httpapi.Prefix+"/tunnel-http/{tunnelId}/{path...}", s)
	api.Handle(httpapi.Prefix+"/tunnel-http/{tunnelId}", http.HandlerFunc(redirectToSlash))
}
