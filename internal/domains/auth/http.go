package auth

import (
	"context"
	"net/http"
	"strings"

	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type loginInput struct {
	Body struct {
		Email    string `json:"email" maxLength:"320" doc:"Case-insensitive."`
		Password string `json:"password" maxLength:"1024"`
	}
}

// loginBody is a session, or (mfaRequired true) an MFA challenge with no tokens.
type loginBody struct {
	MFARequired      bool           `json:"mfaRequired"`
	User             *identity.User `json:"user,omitempty"`
	AccessToken      string         `json:"accessToken,omitempty"`
	RefreshToken     string         `json:"refreshToken,omitempty"`
	ExpiresInSeconds int            `json:"expiresInSeconds,omitempty"`
	TempToken        string         `json:"tempToken,omitempty" doc:"With mfaRequired: pass to /auth/mfa/verify within 5 minutes."`
	MFAMethod        string         `json:"mfaMethod,omitempty"`
}

type loginOutput struct{ Body loginBody }

type sessionOutput struct{ Body *Session }

type refreshInput struct {
	Body struct {
		RefreshToken string `json:"refreshToken" maxLength:"256"`
	}
}

type logoutInput struct {
	Authorization string `header:"Authorization"`
	Body          *struct {
		RefreshToken string `json:"refreshToken,omitempty" maxLength:"256"`
	} `required:"false"`
}

type passwordInput struct {
	Body struct {
		CurrentPassword string `json:"currentPassword" maxLength:"1024"`
	}
}

type codePasswordInput struct {
	Body struct {
		Code            string `json:"code" maxLength:"32" doc:"A 6-digit TOTP code, or a recovery code (XXXX-XXXX)."`
		CurrentPassword string `json:"currentPassword" maxLength:"1024"`
	}
}

type recoveryCodesOutput struct {
	Body struct {
		RecoveryCodes []string `json:"recoveryCodes" doc:"Shown once; each works once in place of a TOTP code."`
	}
}

type verifyInput struct {
	Body struct {
		TempToken string `json:"tempToken" maxLength:"2048"`
		Code      string `json:"code" maxLength:"32"`
		Method    string `json:"method,omitempty" enum:"totp,recovery" doc:"Informational: the code's form decides."`
	}
}

type stepUpInput struct {
	Body struct {
		Code string `json:"code" maxLength:"32"`
	}
}

type acceptInviteInput struct {
	Body struct {
		Token    string `json:"token" maxLength:"256"`
		Password string `json:"password" maxLength:"1024"`
		Name     string `json:"name,omitempty" maxLength:"200"`
	}
}

type forgotInput struct {
	Body struct {
		Email string `json:"email" maxLength:"320"`
	}
}

type messageOutput struct {
	Body struct {
		Message string `json:"message"`
	}
}

type resetInput struct {
	Body struct {
		Token    string `json:"token" maxLength:"256"`
		Password string `json:"password" maxLength:"1024"`
	}
}

type adminResetInput struct {
	ID string `path:"id" format:"uuid"`
}

type adminResetOutput struct {
	Body struct {
		EmailSent bool   `json:"emailSent"`
		ResetURL  string `json:"resetUrl,omitempty" doc:"Present when SMTP is not configured: pass it to the user."`
	}
}

type changePasswordInput struct {
	Body struct {
		CurrentPassword string `json:"currentPassword" maxLength:"1024"`
		NewPassword     string `json:"newPassword" maxLength:"1024"`
	}
}

// Register adds the /auth routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Authentication"
	httpapi.Register(api, httpapi.Route{ID: "login", Method: http.MethodPost, Path: "/auth/login", Tag: tag, Public: true,
		Summary:     "Sign in with email and password",
		Description: "Rate-limited per IP (10 per 5 min) and per account (5 per 5 min); five failures lock the account for 15 minutes. A user with MFA gets mfaRequired and a tempToken instead of tokens."},
		func(ctx context.Context, in *loginInput) (*loginOutput, error) {
			res, err := s.Login(ctx, in.Body.Email, in.Body.Password)
			if err != nil {
				return nil, err
			}
			if res.Challenge != nil {
				return &loginOutput{Body: loginBody{MFARequired: true, TempToken: res.Challenge.TempToken, MFAMethod: res.Challenge.MFAMethod}}, nil
			}
			return &loginOutput{Body: loginBody{User: &res.Session.User, AccessToken: res.Session.AccessToken,
				RefreshToken: res.Session.RefreshToken, ExpiresInSeconds: res.Session.ExpiresInSeconds}}, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "refresh-session", Method: http.MethodPost, Path: "/auth/refresh", Tag: tag, Public: true,
		Summary:     "Rotate a refresh token",
		Description: "Returns new tokens; the presented refresh token stops working. Presenting an already-rotated token ends the whole session."},
		func(ctx context.Context, in *refreshInput) (*sessionOutput, error) {
			sess, err := s.Refresh(ctx, in.Body.RefreshToken)
			return &sessionOutput{Body: sess}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "logout", ChangesAccess: true, Method: http.MethodPost, Path: "/auth/logout", Tag: tag, Public: true,
		Status: http.StatusNoContent, Summary: "End a session",
		Description: "Revokes the session of the refresh token in the body, or else of the bearer access token."},
		func(ctx context.Context, in *logoutInput) (*struct{}, error) {
			var refresh string
			if in.Body != nil {
				refresh = in.Body.RefreshToken
			}
			return nil, s.Logout(ctx, refresh, strings.TrimPrefix(in.Authorization, "Bearer "))
		})
	httpapi.Register(api, httpapi.Route{ID: "mfa-setup", Method: http.MethodPost, Path: "/auth/mfa/setup", Tag: tag,
		Summary: "Start TOTP enrolment", Description: "Returns a new secret and otpauth URL; MFA turns on only after /auth/mfa/enable."},
		func(ctx context.Context, in *passwordInput) (*struct{ Body *MFASetup }, error) {
			out, err := s.SetupMFA(ctx, access.PrincipalFrom(ctx), in.Body.CurrentPassword)
			return &struct{ Body *MFASetup }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mfa-enable", ChangesAccess: true, Method: http.MethodPost, Path: "/auth/mfa/enable", Tag: tag,
		Summary: "Confirm TOTP enrolment", Description: "Returns 10 one-time recovery codes."},
		func(ctx context.Context, in *codePasswordInput) (*recoveryCodesOutput, error) {
			codes, err := s.EnableMFA(ctx, access.PrincipalFrom(ctx), in.Body.Code, in.Body.CurrentPassword)
			out := &recoveryCodesOutput{}
			out.Body.RecoveryCodes = codes
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mfa-disable", ChangesAccess: true, Method: http.MethodPost, Path: "/auth/mfa/disable", Tag: tag,
		Status: http.StatusNoContent, Summary: "Turn MFA off"},
		func(ctx context.Context, in *codePasswordInput) (*struct{}, error) {
			return nil, s.DisableMFA(ctx, access.PrincipalFrom(ctx), in.Body.Code, in.Body.CurrentPassword)
		})
	httpapi.Register(api, httpapi.Route{ID: "mfa-recovery-codes", Method: http.MethodPost, Path: "/auth/mfa/recovery-codes", Tag: tag,
		Summary: "Replace the recovery codes"},
		func(ctx context.Context, in *passwordInput) (*recoveryCodesOutput, error) {
			codes, err := s.RegenerateRecoveryCodes(ctx, access.PrincipalFrom(ctx), in.Body.CurrentPassword)
			out := &recoveryCodesOutput{}
			out.Body.RecoveryCodes = codes
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mfa-verify", Method: http.MethodPost, Path: "/auth/mfa/verify", Tag: tag, Public: true,
		Summary:     "Complete an MFA sign-in",
		Description: "Takes the tempToken of /auth/login and a TOTP or recovery code; 5 tries per 5 minutes. The access token carries mfa: true."},
		func(ctx context.Context, in *verifyInput) (*sessionOutput, error) {
			sess, err := s.VerifyMFA(ctx, in.Body.TempToken, in.Body.Code)
			return &sessionOutput{Body: sess}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mfa-step-up", Method: http.MethodPost, Path: "/auth/mfa/step-up", Tag: tag,
		Summary:     "Complete MFA in a signed-in session",
		Description: "Returns an access token with mfa: true; the session's refresh token keeps working and now yields MFA-completed tokens."},
		func(ctx context.Context, in *stepUpInput) (*sessionOutput, error) {
			sess, err := s.StepUp(ctx, access.PrincipalFrom(ctx), in.Body.Code)
			return &sessionOutput{Body: sess}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "accept-invite", ChangesAccess: true, Method: http.MethodPost, Path: "/auth/accept-invite", Tag: tag, Public: true,
		Summary: "Accept an invitation", Description: "Sets the password (8 to 128 characters with lower, upper and digit), activates the account and signs in."},
		func(ctx context.Context, in *acceptInviteInput) (*sessionOutput, error) {
			sess, err := s.AcceptInvite(ctx, in.Body.Token, in.Body.Password, in.Body.Name)
			return &sessionOutput{Body: sess}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "forgot-password", Method: http.MethodPost, Path: "/auth/forgot-password", Tag: tag, Public: true,
		Status: http.StatusAccepted, Summary: "Email a password-reset link",
		Description: "Answers the same whether or not the address exists. Needs SMTP_URL; without it an administrator issues the link with POST /users/{id}/password-reset."},
		func(ctx context.Context, in *forgotInput) (*messageOutput, error) {
			out := &messageOutput{}
			out.Body.Message = "if the address belongs to an active account, a reset link is on its way"
			return out, s.ForgotPassword(ctx, in.Body.Email)
		})
	httpapi.Register(api, httpapi.Route{ID: "reset-password", ChangesAccess: true, Method: http.MethodPost, Path: "/auth/reset-password", Tag: tag, Public: true,
		Status: http.StatusNoContent, Summary: "Set a new password with a reset token", Description: "Every session of the user ends."},
		func(ctx context.Context, in *resetInput) (*struct{}, error) {
			return nil, s.ResetPassword(ctx, in.Body.Token, in.Body.Password)
		})
	httpapi.Register(api, httpapi.Route{ID: "issue-password-reset", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/users/{id}/password-reset",
		Tag: "Users", Permission: access.UsersWrite, Summary: "Issue a password-reset link for a user",
		Description: "Mails the link (valid one hour) when SMTP is configured; otherwise returns it as resetUrl. The user must be active and manageable by the caller."},
		func(ctx context.Context, in *adminResetInput) (*adminResetOutput, error) {
			link, err := s.AdminPasswordReset(ctx, in.ID)
			out := &adminResetOutput{}
			out.Body.ResetURL, out.Body.EmailSent = link, link == ""
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "change-password", ChangesAccess: true, Method: http.MethodPost, Path: "/auth/change-password", Tag: tag,
		Status: http.StatusNoContent, Summary: "Change the caller's password", Description: "Every session of the user ends; sign in again."},
		func(ctx context.Context, in *changePasswordInput) (*struct{}, error) {
			return nil, s.ChangePassword(ctx, access.PrincipalFrom(ctx), in.Body.CurrentPassword, in.Body.NewPassword)
		})
}
