import { router } from '../../trpc/init.js';
import { authEndpointProcedure, authedAuthEndpointProcedure } from '../../trpc/procedures.js';
import {
  ZLoginInput,
  ZLoginOutput,
  ZLogoutOutput,
  ZMeOutput,
  ZRefreshInput,
  ZRefreshOutput,
  ZRegisterInput,
} from './auth.schema.js';
import * as auth from './auth.service.js';
import { ZEmptyInput, ZNoQuery } from '../../lib/schema.js';

const tags = ['Authentication'];

export const authRouter = router({
  login: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/login',
        tags,
        summary: 'Log in with email and password',
        protect: false,
      },
    })
    .input(ZLoginInput)
    .output(ZLoginOutput)
    .mutation(({ ctx, input }) => auth.login(ctx, input)),

  register: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/register',
        tags,
        summary: 'Create an organization and its owner',
        description:
          'Creates an organization on the `starter` plan with the caller as its owner, and logs in.',
        protect: false,
      },
      successStatus: 201,
      location: '/users/{user.id}',
    })
    .input(ZRegisterInput)
    .output(ZLoginOutput)
    .mutation(({ ctx, input }) => auth.register(ctx, input)),

  refresh: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/refresh',
        tags,
        summary: 'Exchange a refresh token for a new token pair',
        description:
          'Refresh tokens rotate on every use. Presenting one that was already used (a second, concurrent use included: exactly one of them wins) revokes every token of its login session.',
        protect: false,
      },
    })
    .input(ZRefreshInput)
    .output(ZRefreshOutput)
    .mutation(({ ctx, input }) => auth.refresh(ctx, input)),

  logout: authedAuthEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/logout',
        tags,
        summary: 'Revoke the current access token and its refresh token',
      },
    })
    .input(ZEmptyInput)
    .output(ZLogoutOutput)
    .mutation(({ ctx }) => auth.logout(ctx)),

  me: authedAuthEndpointProcedure
    .meta({ openapi: { method: 'GET', path: '/auth/me', tags, summary: 'The authenticated user' } })
    .input(ZNoQuery.optional())
    .output(ZMeOutput)
    .query(({ ctx }) => auth.me(ctx)),
});
