"""English material of bench/_conversations.py: what two people tell each other over many
dated sessions, as an extraction step writes it down (third person, names, dates), and
the questions asked about it.

Each piece carries its questions: a ``single`` question (one fact answers it), an
``open`` one (an inference from the fact, sharing none of its words but the person's
name), and for events a ``when`` question (answered by the date of the session the
event was told in) and a ``which`` question naming the month instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hobby:
    fact: str  # with {p} (the person), {x} (a detail)
    details: tuple[str, ...]
    single: str  # with {p}; answered by the fact
    open: str  # with {p}; an inference, sharing no word with the fact but the name
    progress: tuple[str, ...]  # later mentions, with {p}, {x}: the same hobby again


@dataclass(frozen=True)
class Activity:
    told: tuple[str, ...]  # with {p}, {x}, {when}: how the fact says it
    details: tuple[str, ...]
    when: str  # "When did {p} ...?", with {x}
    which: str  # with {p}, {month}: what was done that month
    reworded: str  # another "when" question, in other words than the fact's, with {p}, {x}
    every: str  # with {p}: all of the person's events of this kind (when there are two)
    only: str  # with {p}: the person's only event of this kind


@dataclass(frozen=True)
class Relation:
    word: str
    fact: str  # with {p}, {name}
    what: str  # with {p}: the relative's job (two hops)
    where: str  # with {p}: the relative's city (two hops)


NAMES = (
    "Caroline", "Melanie", "Jon", "Gina", "Evan", "Sam", "Audrey", "Andrew", "James",
    "John", "Maria", "Nate", "Joanna", "Tim", "Calvin", "Dave", "Priya", "Tomas", "Leila",
    "Hannah", "Marcus", "Irene", "Victor", "Rosa", "Oliver", "Nadia", "Felix", "Greta",
)  # fmt: skip

RELATIVE_NAMES = (
    "Nora", "Ethan", "Lucy", "Owen", "Clara", "Ben", "Ruth", "Leo", "Ava", "Max", "Iris",
    "Hugo", "Mila", "Theo", "Zara", "Colin", "Elsie", "Jasper", "Wendy", "Rafael",
)  # fmt: skip

JOBS = (
    "a paediatric nurse", "a civil engineer", "a high-school chemistry teacher",
    "a software developer", "a veterinary surgeon", "an accountant", "a pastry chef",
    "a firefighter", "a graphic designer", "a social worker", "a pharmacist", "a carpenter",
)  # fmt: skip

CITIES = (
    "Denver", "Portland", "Austin", "Boston", "Seattle", "Chicago", "Toronto", "Dublin",
    "Edinburgh", "Melbourne", "San Diego", "Atlanta",
)  # fmt: skip

# The person's job and city: the single-hop questions about them share no word.
PROFILE = (
    ("{p} works as {job} in {city}.", "What does {p} do for a living?"),
    ("{p} has lived in {city} since childhood.", "Which town is {p}'s home?"),
)

RELATIONS = (
    Relation("sister", "{p}'s younger sister is called {name}.",
             "What is the occupation of {p}'s sister?", "In which town does {p}'s sister live?"),
    Relation("brother", "{p} has an older brother named {name}.",
             "What does {p}'s brother do for a living?", "Where is {p}'s brother based?"),
    Relation("best friend", "{p}'s best friend from college is {name}.",
             "What job does {p}'s best friend have?", "Which city is {p}'s best friend in?"),
    Relation("partner", "{p} has been dating {name} for three years.",
             "What is the profession of {p}'s partner?", "Where does {p}'s partner live?"),
)  # fmt: skip

RELATIVE = "{name} works as {job} in {city}."

HOBBIES = (
    Hobby("{p} has been learning to play the {x} for two years.", ("violin", "cello", "piano"),
          "Which instrument is {p} learning?", "Would {p} enjoy a chamber music concert?",
          ("{p} practised the {x} every evening this week.",
           "{p} performed a short piece on the {x} at a friend's party.")),
    Hobby("{p} paints {x} in watercolour at weekends.", ("landscapes", "portraits", "birds"),
          "What does {p} paint?", "Is {p} likely to visit an art gallery?",
          ("{p} finished a new watercolour of {x}.", "{p} bought new brushes for painting {x}.")),
    Hobby("{p} goes rock climbing at an indoor gym in {x}.", ("the city centre", "the old mill"),
          "Where does {p} go rock climbing?",
          "Does {p} have a physically demanding pastime?",
          ("{p} reached a harder climbing grade at the gym in {x}.",
           "{p} hurt a finger while climbing.")),
    Hobby("{p} grows {x} in a community garden.", ("tomatoes", "herbs", "strawberries"),
          "What does {p} grow in the community garden?",
          "Would {p} know how to look after plants?",
          ("{p} harvested a basket of {x} from the garden.",
           "{p} lost some {x} to slugs in the garden.")),
    Hobby("{p} runs half marathons and trains with a club.", ("", ),
          "What distance does {p} race?", "Is {p} someone who keeps fit?",
          ("{p} ran a half marathon in under two hours.",
           "{p} trained for a half marathon in the rain.")),
    Hobby("{p} writes short stories about {x}.", ("time travel", "small-town mysteries"),
          "What are {p}'s short stories about?", "Could {p} be an aspiring author?",
          ("{p} sent a short story about {x} to a magazine.",
           "{p} read a new short story aloud at a writing group.")),
    Hobby("{p} collects vintage {x}.", ("vinyl records", "film cameras", "board games"),
          "What vintage things does {p} collect?",
          "Does {p} like hunting for old treasures at flea markets?",
          ("{p} found rare {x} at a flea market.", "{p} showed off a collection of {x}.")),
    Hobby("{p} volunteers at an animal shelter on Sundays.", ("",),
          "Where does {p} volunteer?", "Does {p} care about dogs and cats without homes?",
          ("{p} helped a shy dog at the shelter get adopted.",
           "{p} walked the shelter's dogs on a cold morning.")),
    Hobby("{p} bakes sourdough bread from a starter named {x}.", ("Bubbles", "Doughy"),
          "What is the name of {p}'s sourdough starter?",
          "Does {p} make food from scratch in the kitchen?",
          ("{p} baked a rye sourdough loaf.", "{p} gave a sourdough loaf to a neighbour.")),
    Hobby("{p} plays chess online and in a local club.", ("",),
          "Where does {p} play chess?", "Does {p} enjoy strategy and thinking games?",
          ("{p} won a chess tournament at the club.", "{p} lost a long chess game online.")),
)  # fmt: skip

ACTIVITIES = (
    Activity(("{p} went hiking at {x} {when}.", "{p} hiked a trail at {x} {when}."),
             ("Mount Rainier", "the Blue Ridge", "Lake Tahoe", "the Catskills"),
             "When did {p} go hiking at {x}?", "Where did {p} hike in {month}?",
             "On what date was {p}'s walk in {x}?", "Which two places has {p} hiked?",
             "Where did {p} go for a hike?"),
    Activity(("{p} attended a {x} workshop {when}.", "{p} took part in a {x} workshop {when}."),
             ("pottery", "photography", "woodworking", "first-aid"),
             "When did {p} attend the {x} workshop?", "What workshop did {p} attend in {month}?",
             "When did {p} learn some {x} skills in a class?",
             "Which two workshops has {p} been to?",
             "What kind of workshop did {p} go to?"),
    Activity(("{p} visited {x} for a long weekend {when}.", "{p} travelled to {x} {when}."),
             ("Lisbon", "Montreal", "Kyoto", "Vienna", "New Orleans"),
             "When did {p} visit {x}?", "Which city did {p} travel to in {month}?",
             "When was {p}'s trip to {x}?", "Name two cities {p} has been to on a trip.",
             "Which city did {p} go away to?"),
    Activity(("{p} adopted a {x} {when}.",),
             ("kitten", "rescue greyhound", "parrot"),
             "When did {p} adopt the {x}?", "What animal did {p} adopt in {month}?",
             "When did {p} bring home the new {x}?", "Which two animals did {p} take in?",
             "What pet did {p} adopt?"),
    Activity(("{p} went to a {x} concert {when}.", "{p} saw {x} play live {when}."),
             ("jazz", "folk", "Coldplay", "symphony"),
             "When did {p} go to the {x} concert?", "Which concert did {p} go to in {month}?",
             "When did {p} hear {x} music performed?", "Which two gigs did {p} see?",
             "What music did {p} hear live?"),
    Activity(("{p} ran a charity 5k for {x} {when}.",),
             ("a children's hospital", "cancer research", "the local food bank"),
             "When did {p} run the charity 5k for {x}?",
             "What cause did {p} run a race for in {month}?",
             "When did {p} raise money for {x} by running?",
             "For which two causes has {p} raced?",
             "What charity did {p} support with a run?"),
    Activity(("{p} started a new course in {x} {when}.", "{p} enrolled in a {x} class {when}."),
             ("Spanish", "sign language", "data analysis", "Italian cooking"),
             "When did {p} start learning {x}?", "What class did {p} sign up for in {month}?",
             "Since when has {p} studied {x}?", "Which two subjects is {p} studying?",
             "What is {p} taking lessons in?"),
    Activity(("{p} moved into a new apartment near {x} {when}.",),
             ("the harbour", "the university", "the central park"),
             "When did {p} move into the apartment near {x}?",
             "Where did {p} move to in {month}?",
             "When did {p} change address to live by {x}?", "Where has {p} lived lately?",
             "Where is {p}'s new apartment?"),
    Activity(("{p} went camping with the family at {x} {when}.",),
             ("Yosemite", "the lake", "a beach in Oregon"),
             "When did {p} go camping at {x}?", "Where did {p} camp in {month}?",
             "When did {p} sleep in a tent at {x}?", "Name two spots where {p} pitched a tent.",
             "Where did {p} go camping?"),
    Activity(("{p} attended a {x} support group meeting {when}.",),
             ("grief", "new parents", "LGBTQ"),
             "When did {p} go to the {x} support group?",
             "Which support group did {p} attend in {month}?",
             "When did {p} meet others for {x} support?", "Which two groups has {p} joined?",
             "What support group does {p} go to?"),
    Activity(("{p} gave a talk about {x} at the local library {when}.",),
             ("mental health", "climate change", "urban gardening"),
             "When did {p} give the talk about {x}?",
             "What did {p} talk about at the library in {month}?",
             "When did {p} speak in public on {x}?", "On which two subjects has {p} spoken?",
             "What topic did {p} present at the library?"),
    Activity(("{p} celebrated a {x} with a party {when}.",),
             ("birthday", "job promotion", "wedding anniversary"),
             "When did {p} celebrate the {x}?", "What did {p} celebrate in {month}?",
             "When was {p}'s {x} party?", "Which two occasions did {p} throw a party for?",
             "What did {p} throw a party for?"),
)  # fmt: skip

# How an event's time is written: the session's date, or words relative to it.
RELATIVE_WHEN = ("yesterday", "last weekend", "last week", "a few days ago")

# Small talk of a session: facts that answer nothing asked, but share its words.
MOODS = (
    "{p} felt tired after a busy week at work.",
    "{p} is looking forward to the summer holidays.",
    "{p} has been sleeping badly because of noisy neighbours.",
    "{p} said the weather has been unusually warm.",
    "{p} is thinking about buying a new car.",
    "{p} is worried about an upcoming exam.",
    "{p} mentioned cooking a big family dinner on Sunday.",
    "{p} said work has been stressful lately.",
    "{p} recommended a documentary about the ocean.",
    "{p} is planning to redecorate the living room.",
    "{p} caught a cold and stayed at home.",
    "{p} thanked {q} for the advice about the job interview.",
    "{p} told {q} about a funny video of a cat.",
    "{p} and {q} talked about their favourite books.",
    "{p} asked {q} how the family is doing.",
)

# What small talk is about: with SMALL_TALK, many facts per speaker that share words
# with the questions ("talk", "family", "work") and answer none of them.
TALK = (
    "{p} talked about {t}.",
    "{p} asked {q} for an opinion on {t}.",
    "{p} shared a story about {t}.",
)
TALK_TOPICS = (
    "a new recipe for lentil soup", "the price of groceries", "a podcast about history",
    "a neighbour's noisy dog", "a broken washing machine", "a delayed train",
    "a childhood friend", "a favourite television series", "the local elections",
    "a cousin's new baby", "plans for the weekend", "a difficult colleague",
    "a book club meeting", "a long queue at the post office", "a new coffee shop",
    "an old school photo", "a pair of running shoes", "learning to drive",
    "a leaking roof", "a surprise gift", "a trip to the dentist", "a garden party",
    "a missed flight", "a funny misunderstanding at work", "saving money for a holiday",
    "a street festival", "a power cut", "a wedding invitation", "a new phone",
    "the family's old photo albums",
)  # fmt: skip
