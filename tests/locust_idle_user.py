"""A user that sends nothing: lets tests drive a shape through real Locust without a target."""

from locust import User, constant, task


class IdleUser(User):
    wait_time = constant(0.5)

    @task
    def idle(self) -> None:
        pass
