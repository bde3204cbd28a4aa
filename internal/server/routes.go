package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/static"
)

// routes lists every route of the desk in one place, each with the least role it needs.
func (s *Server) routes() {
	e := s.echo
	e.Use(s.logRequests, s.recoverPanics, s.limitTime, s.closeWhileDraining, s.securityHeaders, s.checkCrossOrigin, s.loadSession, s.capCostly, s.checkInput,
		s.loadTopBar, s.loadNotice)

	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.StaticFS("/static", static.FS)
	e.GET("/favicon.ico", handleFavicon)

	// Every POST from a browser's form answers with a redirect to a page, which says what the
	// action did (confirm, notice.go), or with a page that says where it stands (answersAt).
	e.GET("/login", s.handleLoginForm)
	e.POST("/login", s.handleLogin, s.confirm(noticeLoggedIn))
	e.POST("/logout", s.handleLogout, s.confirm(noticeLoggedOut))
	// A sign-in in the popup a CRM's frame opens ends as a ticket, handed to the frame and traded
	// there for a session of its own.
	e.GET("/login/popup", s.handleLoginPopup)
	e.POST("/login/complete", s.handleLoginComplete, s.confirm(noticeLoggedIn))
	e.GET("/sso/start", s.handleSSOStart)
	e.GET("/sso/callback", s.handleSSOCallback)

	agent := private(s.requireRole(auth.RoleAgent))
	e.GET("/", s.handleHome, agent)
	e.GET("/mine", s.handleMine, agent)
	e.GET("/queues/:name", s.handleQueue, agent)
	e.POST("/queues/:name/next", s.handleNext, agent, s.confirm(noticeReserved))
	e.GET("/handoffs/:id", s.handleHandoff, agent)
	e.GET("/sidebar/:id", s.handleSidebar, agent)
	e.POST("/handoffs/:id/accept", s.handleAccept, agent, s.confirm(noticeAccepted))
	e.POST("/handoffs/:id/reject", s.handleReject, agent, s.confirm(noticeRejected))
	e.POST("/handoffs/:id/return", s.handleReturn, agent, s.confirm(noticeReturned))
	e.POST("/handoffs/:id/transfer", s.handleTransfer, agent, s.confirm(noticeTransferred))
	e.POST("/handoffs/:id/resolve", s.handleResolve, agent, s.confirm(noticeResolved))
	e.POST("/handoffs/:id/reply", s.handleReply, agent, s.confirm(noticeReplySent))
	e.POST("/handoffs/:id/notes", s.handleNote, agent, s.confirm(noticeNoteAdded)) // members of its queue and supervisors (actions.Check)
	// Refund approvals: the holder asks and the requester withdraws (actions.Check); supervisors
	// decide, never their own request nor a package they hold (approvals.Check).
	e.POST("/handoffs/:id/approval", s.handleRequestApproval, agent, s.confirm(noticeApprovalRequested))
	e.POST("/handoffs/:id/approval/withdraw", s.handleWithdrawApproval, agent, s.confirm(noticeApprovalWithdrawn))
	e.POST("/handoffs/:id/decline", s.handleDecline, agent, s.confirm(noticeDeclined)) // a warm package's ring
	e.POST("/me/status", s.handleSetStatus, agent, s.confirmBy(noticeStatus))          // available, break or away
	// Search finds what the viewer may see; a supervisor moves a held package (actions.Check). Search,
	// the audit and the exports are capped per person (costlyRoutes).
	e.GET("/packages", s.handleSearch, agent)
	e.POST("/handoffs/:id/reassign", s.handleReassign, agent, s.confirm(noticeReassigned))
	e.GET("/ws", s.handleSocket, agent)

	supervisor := private(s.requireRole(auth.RoleSupervisor))
	e.GET("/dashboard", s.handleDashboard, supervisor)
	e.GET("/evals", s.handleEvals, supervisor)
	e.GET("/evals/replies/:id", s.handleEvalDiff, supervisor)
	e.GET("/evals/export.jsonl", s.handleEvalsExport, supervisor)
	e.GET("/packages/export.csv", s.handleSearchCSV, supervisor)
	e.GET("/approvals", s.handleApprovals, supervisor)
	e.POST("/approvals/:approval_id/approve", s.handleApprove, supervisor, s.confirm(noticeApprovalGranted))
	e.POST("/approvals/:approval_id/deny", s.handleDeny, supervisor, s.confirm(noticeApprovalDenied))

	e.GET("/audit", s.handleAudit, supervisor)
	e.GET("/audit/export.csv", s.handleAuditCSV, supervisor)
	e.GET("/audit/export.jsonl", s.handleAuditJSONL, supervisor)

	// A person whose password was reset chooses a new one here before anything else opens.
	e.GET("/password", s.handlePasswordForm, agent)
	e.POST("/password", s.handleChangePassword, agent, s.confirm(noticePasswordChanged))

	// The admin console: queues, users, bot keys and their webhook deliveries. Creating a key,
	// resetting a password and rotating a secret answer with the secret, shown this once, and
	// disabling a person or revoking a key first with what it will do: pages that say where they
	// stand (answersAt).
	admin := private(s.requireRole(auth.RoleAdmin))
	e.GET("/admin", s.handleAdmin, admin)
	e.GET("/admin/queues", s.handleAdminQueues, admin)
	e.POST("/admin/queues", s.handleAdminCreateQueue, admin, s.confirm(noticeQueueCreated))
	e.GET("/admin/queues/:id", s.handleAdminQueue, admin)
	e.POST("/admin/queues/:id", s.handleAdminSaveQueue, admin, s.confirm(noticeQueueSaved))
	e.POST("/admin/queues/:id/disable", s.handleAdminDisableQueue, admin, s.confirm(noticeQueueDisabled))
	e.POST("/admin/queues/:id/enable", s.handleAdminEnableQueue, admin, s.confirm(noticeQueueEnabled))
	e.POST("/admin/queues/:id/members", s.handleAdminAddMember, admin, s.confirm(noticeMemberAdded))
	e.POST("/admin/queues/:id/members/:user/remove", s.handleAdminRemoveMember, admin, s.confirm(noticeMemberRemoved))
	e.POST("/admin/queues/:id/saved-replies", s.handleAdminAddSavedReply, admin, s.confirm(noticeSavedReplyAdded))
	e.POST("/admin/queues/:id/saved-replies/:reply/remove", s.handleAdminRemoveSavedReply, admin, s.confirm(noticeSavedReplyRemoved))
	e.GET("/admin/users", s.handleAdminUsers, admin)
	e.POST("/admin/users", s.handleAdminCreateUser, admin, s.confirm(noticeUserCreated))
	e.GET("/admin/users/:id", s.handleAdminUser, admin)
	e.POST("/admin/users/:id", s.handleAdminSaveUser, admin, s.confirm(noticeUserSaved))
	e.POST("/admin/users/:id/disable", s.handleAdminDisableUser, admin, s.confirm(noticeUserDisabled))
	e.POST("/admin/users/:id/enable", s.handleAdminEnableUser, admin, s.confirm(noticeUserEnabled))
	e.POST("/admin/users/:id/reset-password", s.handleAdminResetPassword, admin)
	e.GET("/admin/keys", s.handleAdminKeys, admin)
	e.POST("/admin/keys", s.handleAdminCreateKey, admin)
	e.GET("/admin/keys/:id", s.handleAdminKey, admin)
	e.POST("/admin/keys/:id", s.handleAdminSaveKey, admin, s.confirm(noticeKeySaved))
	e.POST("/admin/keys/:id/revoke", s.handleAdminRevokeKey, admin, s.confirm(noticeKeyRevoked))
	e.POST("/admin/keys/:id/deliveries/:delivery/redeliver", s.handleAdminRedeliver, admin, s.confirm(noticeRedelivered))
	// A key's signing secret rotated with an overlap; password login off for a person; what SSO
	// does with an unknown email.
	e.POST("/admin/keys/:id/rotate", s.handleAdminRotateKey, admin)
	e.POST("/admin/users/:id/sso-only", s.handleAdminSSOOnly, admin, s.confirmBy(noticeSSOOnly))
	e.GET("/admin/settings", s.handleAdminSettings, admin)
	e.POST("/admin/settings", s.handleAdminSaveSettings, admin, s.confirm(noticeSettingsSaved))

	// HEAD answers as GET without the body, for tools that check a document before fetching it.
	e.Match([]string{http.MethodGet, http.MethodHead}, "/api/v1/schema/handoff-v1.json", s.handleSchema)
	e.Match([]string{http.MethodGet, http.MethodHead}, "/api/openapi.yaml", s.handleOpenAPI)
	bot := e.Group("/api/v1", s.requireBot)
	bot.POST("/handoffs", s.handleSubmitHandoff)
	bot.GET("/handoffs", s.handleListHandoffs)
	bot.GET("/handoffs/:id", s.handleGetHandoff)
	bot.POST("/handoffs/:id/cancel", s.handleCancelHandoff)
	// The conversation after the handoff: the customer's messages in, the thread back out.
	bot.POST("/handoffs/:id/messages", s.handlePostMessage)
	bot.GET("/handoffs/:id/messages", s.handleMessages)
	bot.POST("/handoffs/:id/csat", s.handleCSAT) // the customer's verdict, once the package closed
	bot.POST("/sw4rm/handoff-requests", s.handleSW4RM)
	// The same bot API as Model Context Protocol tools, for a bot's model to call (internal/mcp).
	e.Match([]string{http.MethodGet, http.MethodPost, http.MethodDelete}, mcpPath, s.handleMCP(), s.requireBot)

	e.RouteNotFound("/*", func(c echo.Context) error { return echo.NewHTTPError(http.StatusNotFound, "no such page") })

	s.templates = map[string]bool{}
	for _, r := range e.Routes() {
		if r.Method != echo.RouteNotFound {
			s.templates[r.Path] = true
		}
	}
}
