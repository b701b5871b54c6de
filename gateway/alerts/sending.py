"""Where an alert goes: each ``alerts.to`` private chat through its platform's adapter,
and the ``alerts.webhook`` as a JSON POST. A failure is logged, never raised: an alert
that cannot be told must not break what it reports on."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import httpx

from adapters.base import Adapter, DeliveryError, OutboundMessage
from gateway.config.alerts import AlertsConfig, alert_target

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_SECONDS = 10.0


class AlertSender:
    def __init__(self, settings: AlertsConfig, adapters: Mapping[str, Adapter]) -> None:
        self.settings = settings
        self.adapters = adapters
        #: The private chat of each ``to`` entry, once opened.
        self._chats: dict[str, str] = {}

    async def send(self, condition: str, state: str, since: float, text: str) -> None:
        for entry in self.settings.to:
            await self._to_chat(entry, text)
        if self.settings.webhook:
            await self._to_webhook(
                self.settings.webhook,
                {"condition": condition, "state": state, "since": since, "text": text},
            )

    async def _to_chat(self, entry: str, text: str) -> None:
        platform, user = alert_target(entry)
        adapter = self.adapters.get(platform)
        if adapter is None:
            log.warning("alert not sent to %s: that platform is not running", entry)
            return
        try:
            chat = self._chats.get(entry) or await adapter.private_chat(user)
            self._chats[entry] = chat
            await adapter.send(OutboundMessage(platform=platform, chat_id=chat, text=text))
        except DeliveryError as error:
            log.warning("alert not sent to %s: %s", entry, error)
        except Exception:  # an adapter's bug must not stop the other recipients
            log.exception("alert not sent to %s", entry)

    async def _to_webhook(self, url: str, body: dict[str, object]) -> None:
        try:
            async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_SECONDS) as client:
                response = await client.post(url, json=body)
            if response.status_code >= 400:
                log.warning("alert webhook answered HTTP %s", response.status_code)
        except httpx.HTTPError as error:
            log.warning("alert webhook failed: %s", type(error).__name__)
        except Exception as error:  # whatever it is, an alert must not break the gateway
            log.warning("alert webhook failed: %s", type(error).__name__)
